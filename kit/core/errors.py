"""The one exception type the CLI turns into a one-line message and exit code 3."""


class BadInput(Exception):
    """Input the gate refuses before (or instead of) running anything.

    The message is a single line that names what is wrong and where (file, key,
    case), so that a CI log shows the cause without a traceback.
    """
