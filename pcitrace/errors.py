"""The one error type users can cause.

Every error a user can provoke (bad file, unknown channel, wrong profile, impossible
request) is a PcitraceError whose message names the file, the place in it and the fix.
The CLI prints it as one line on stderr and exits with status 2; nothing else should
escape to the user as a traceback.
"""

from __future__ import annotations

import os


class PcitraceError(Exception):
    """A problem with the user's input, stated so they can fix it.

    ``path``: the file concerned (if any); ``where``: the place in it (chunk name, line,
    byte offset, time); ``fix``: what to do about it.
    """

    def __init__(self, message: str, *, path: str | os.PathLike | None = None,
                 where: str | None = None, fix: str | None = None):
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.where = where
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = []
        if self.path:
            parts.append(f"{self.path}")
            if self.where:
                parts[-1] += f" ({self.where})"
            parts[-1] += ":"
        elif self.where:
            parts.append(f"{self.where}:")
        parts.append(self.message)
        text = " ".join(parts)
        if self.fix:
            text += f" Fix: {self.fix}"
        return text


def describe_bug(exc: BaseException) -> str:
    """One line for an exception that is not a PcitraceError, i.e. a bug in pcitrace: its type,
    message and the innermost place it was raised, so that a report of it can be acted on."""
    import traceback
    from pathlib import Path

    tb = traceback.extract_tb(exc.__traceback__)
    where = f"in {Path(tb[-1].filename).name}:{tb[-1].lineno}; " if tb else ""
    message = " ".join(str(exc).split())            # one line, whatever the message held
    return f"{type(exc).__name__}: {message} ({where}please report this with the file)"


def warning_line(path, text: str) -> str:
    """One warning on standard error: what pcitrace could not read or could not tell, and where."""
    return f"pcitrace: warning: {path}: {text}"
