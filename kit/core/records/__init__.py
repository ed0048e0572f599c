"""The kit's files and what passes between its processes: their formats, and reading and writing them.

A record here is data, not a judgment: the typed records of an observation, a score and a case result
(``records``), canonical JSON and content digests (``jsonio``), the prompt fixture (``fixture``), the resolved
case a notebook receives (``spec``, ``contract``), a backend's answer held to its shape (``observations``), the
progress and phases a kernel reports (``progress``, ``phases``), a run directory's names, its walk and what it
holds read back (``rundir``, ``results``, ``resultcheck``), the shape of a calibration record
(``recordcheck``), where the project's files are (``paths``) and outside text made safe to show (``text``).
Judging them is kit.core.verdict's; the figures a record derives from its bounds (a case's headroom, a prompt's
severity) are the rules' (kit.core.rules), the one layer below.
"""
