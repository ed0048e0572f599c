"""Backends turn (model, fixture prompts) into observations.

One subpackage per backend: ``info.py`` holds the registry record (light, importable in any kernel; the
package re-exports it as ``BACKEND``, the name its entry point gives), ``options.py`` the pydantic schema of its
case options (read by the descriptor only), and ``runtime.py`` the engine side, imported only inside the case's
kernel. The registry lists them.
"""
