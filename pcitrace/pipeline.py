"""capture -> profile -> decode -> analyse -> link, in one place.

``run`` is what the CLI's decode command, the batch report, the viewer and correlate call:
it opens a capture (or takes an open one), resolves its profile, decodes it, analyses the
records and links probe frames to the DMAs, stopping after the stage ``until`` names, and
returns a plain ``Run``.

One error policy: whatever a user can cause comes out as a PcitraceError naming the file, the
stage and the fix (running out of memory or a failing read included); its ``run`` attribute is
the ``Run`` as far as it got (the viewer shows decoded transactions whose analysis failed).
Anything else is a bug in pcitrace and is left to propagate with its traceback.
``cancelled()`` is asked between stages and as decoding goes; when it says yes, ``Cancelled``
is raised.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Literal

from pcitrace.errors import PcitraceError

Stage = Literal["open", "profile", "decode", "analyse", "link"]
STAGES: tuple[str, ...] = ("open", "profile", "decode", "analyse", "link")


class Cancelled(Exception):
    """The caller's ``cancelled()`` said stop."""


@dataclasses.dataclass
class Run:
    """What the stages made, up to ``stage`` (the last one done; later fields stay empty)."""

    capture: object = None           # pcitrace.capture.Capture
    profile: object = None           # pcitrace.capture.profile.Profile
    decoded: object = None           # pcitrace.decode.DecodeResult
    analysis: object = None          # pcitrace.analyse.Analysis
    chains: dict = dataclasses.field(default_factory=dict)   # link -> pcitrace.analyse.wire.LinkChain
    stage: str | None = None

    @property
    def path(self) -> str | None:
        return getattr(self.capture, "path", None)


def _open(capture):
    from pcitrace.capture import open_capture

    return open_capture(capture) if isinstance(capture, (str, os.PathLike)) else capture


def _profile(capture, profile):
    from pcitrace.capture.profile import Profile, resolve_profile

    if isinstance(profile, Profile):
        profile.check(capture)
        return profile
    return resolve_profile(capture, os.fspath(profile) if profile is not None else None)


def _user_error(exc: BaseException, stage: str, path) -> PcitraceError:
    """The PcitraceError for a failure a user can cause that came out as something else."""
    if isinstance(exc, MemoryError):
        return PcitraceError(f"out of memory while running the {stage} stage", path=path, where=stage,
                             fix="use a machine with more memory, or decode fewer buses (--bus)")
    return PcitraceError(f"cannot read the capture: {exc}", path=path, where=stage,
                         fix="check that the file is complete and readable")


def run(capture, profile=None, *, until: Stage = "link", buses=None, engine: str = "fast",
        options=None, chunk_clocks: int | None = None,
        progress: Callable[[str, int], None] | None = None,
        cancelled: Callable[[], bool] | None = None) -> Run:
    """Run the stages up to and including ``until``.

    ``capture``: a path or an open Capture; ``profile``: a Profile, a profile path, or None
    (NAME.profile.toml beside the capture, else auto-detection); ``buses``: a name or names
    to decode (default all); ``engine``: 'fast' or 'sigrok'; ``options``: AnalysisOptions.
    ``progress(stage, clocks)``: called with 0 as each stage starts, then while decoding with
    the bus clocks decoded since the last call.
    """
    if until not in STAGES:
        raise PcitraceError(f"unknown pipeline stage {until!r}", fix=f"use one of {', '.join(STAGES)}")
    out = Run()
    path = os.fspath(capture) if isinstance(capture, (str, os.PathLike)) else getattr(capture, "path", None)
    steps = _steps(out, capture, profile, buses, engine, options, chunk_clocks, progress, cancelled)
    for stage in STAGES[:STAGES.index(until) + 1]:
        if cancelled is not None and cancelled():
            raise Cancelled()
        if progress is not None:
            progress(stage, 0)
        try:
            steps[stage]()
        except PcitraceError as exc:
            exc.run = out
            raise
        except (MemoryError, OSError) as exc:
            err = _user_error(exc, stage, path)
            err.run = out
            raise err from exc
        out.stage = stage
    return out


def _decode_progress(progress, cancelled) -> Callable[[int], None]:
    """The decoder's per-chunk callback: stop if ``cancelled()``, else report the clocks done."""

    def on_clocks(n: int) -> None:
        if cancelled is not None and cancelled():
            raise Cancelled()
        if progress is not None:
            progress("decode", n)
    return on_clocks


def stream_records(capture, profile=None, *, buses=None, chunk_clocks: int | None = None,
                   progress: Callable[[str, int], None] | None = None,
                   cancelled: Callable[[], bool] | None = None):
    """The decode stage streamed: the fast engine's records chunk by chunk (as
    ``decode.iter_records`` gives them), for output too long to hold (``pcitrace decode -o``).

    The capture is opened and its profile resolved by ``run``; reading the chunks has the same
    error policy, progress and cancel as ``run``'s decode stage. Returns (the Run so far, an
    iterator of record arrays)."""
    from pcitrace.decode import DEFAULT_CHUNK_CLOCKS, iter_records

    opened = run(capture, profile, until="profile", progress=progress, cancelled=cancelled)
    on_clocks = _decode_progress(progress, cancelled)

    def chunks():
        if progress is not None:
            progress("decode", 0)
        try:
            yield from iter_records(opened.capture, opened.profile, buses=buses,
                                    chunk_clocks=chunk_clocks or DEFAULT_CHUNK_CLOCKS, progress=on_clocks)
        except PcitraceError as exc:
            exc.run = opened
            raise
        except (MemoryError, OSError) as exc:
            err = _user_error(exc, "decode", opened.path)
            err.run = opened
            raise err from exc

    return opened, chunks()


def _steps(out: Run, capture, profile, buses, engine, options, chunk_clocks, progress, cancelled) -> dict:
    """The stages as steps that fill ``out`` in."""
    on_clocks = _decode_progress(progress, cancelled)

    def do_open():
        out.capture = _open(capture)

    def do_profile():
        out.profile = _profile(out.capture, profile)

    def do_decode():
        from pcitrace.decode import DEFAULT_CHUNK_CLOCKS, decode_capture

        out.decoded = decode_capture(out.capture, out.profile, buses=buses, engine=engine,
                                     chunk_clocks=chunk_clocks or DEFAULT_CHUNK_CLOCKS, progress=on_clocks)

    def do_analyse():
        from pcitrace.analyse import analyse

        out.analysis = analyse(out.decoded, options)

    def do_link():
        from pcitrace.analyse.wire import link_chains

        out.chains = link_chains(out.decoded, out.analysis)

    return {"open": do_open, "profile": do_profile, "decode": do_decode, "analyse": do_analyse, "link": do_link}


__all__ = ["run", "Run", "Cancelled", "STAGES"]
