"""An emulated SUMP / OLS analyser on a real pseudo-terminal that plays back a capture.

The played-back capture is "the world" the probes see: probe k carries the k-th 1-bit line
of the capture (vectors split into bits, as in .sr files) or the lines named in
``probes``. When armed the emulator samples that world at the rate its divider gives
(sample-and-hold of the capture's levels at each sample time, so a capture at a rate that
is a multiple of the device rate is decimated and a capture at the same rate comes back
unchanged), runs its trigger stages over it, and sends the read window last sample first,
run-length encoded if asked, as a device does. Before the capture starts the world holds
its first sample and after it ends its last one.

With the external-clock flag the device takes one sample per clock edge instead: every
sample of a state capture, or each rising (falling, with the invert flag) edge of the
``clock_line`` of a timing capture (read at the first sample after the edge, as pcitrace
reads timing captures everywhere, docs/records.md).

Deliberate limits, stated: the noise filter and test modes are accepted and ignored; a stage counts as configured once any of its three registers was written since
the last reset (the hardware's unconfigured stages, mask 0, would match at once).

``bytes_per_s`` paces the transfer like a slow serial link. The fault mode stops after ``fault_after`` bytes of sample data: ``"close"`` closes the pty
(a pulled USB cable), ``"hang"`` keeps it open and goes silent.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import select
import struct
import termios
import threading
import time
import tty

import numpy as np

from pcitrace.acquire import sump
from pcitrace.capture.model import Capture
from pcitrace.capture.sr import bit_channels
from pcitrace.errors import PcitraceError

DEFAULT_MEMORY = 24 * 1024
DEFAULT_MAX_RATE = 200_000_000


@dataclasses.dataclass
class _Stage:
    mask: int = 0
    value: int = 0
    config: int = 0
    configured: bool = False

    @property
    def trigger(self) -> sump.TriggerStage:
        return sump.TriggerStage.from_words(self.mask, self.value, self.config)


class SumpEmulator:
    """Serve ``capture`` as a SUMP device on a pty; ``port`` is the path a client opens.

    ``received`` holds every byte the emulator was sent (tests check that refused requests
    sent nothing), ``log`` the decoded commands.
    """

    def __init__(self, capture: Capture, *, probes: list[str] | None = None,
                 memory: int = DEFAULT_MEMORY, max_rate_hz: int = DEFAULT_MAX_RATE,
                 fault_after: int | None = None, fault_mode: str = "close",
                 bytes_per_s: float | None = None, clock_line: str | None = None,
                 name: str = "pcitrace SUMP emulator"):
        lines = bit_channels(capture)
        by_name = {ln[0]: ln for ln in lines}
        if probes is None:
            if len(lines) > sump.MAX_CHANNELS:
                raise PcitraceError(
                    f"the capture has {len(lines)} lines and a SUMP device has {sump.MAX_CHANNELS} probes",
                    path=capture.path, fix="choose up to 32 lines with --probes NAME,NAME,...")
            chosen = lines
        else:
            missing = [p for p in probes if p not in by_name]
            if missing:
                raise PcitraceError(f"no line named {', '.join(map(repr, missing))}; the capture has "
                                    f"{', '.join(by_name)}", path=capture.path,
                                    fix="use line names from `pcitrace info`")
            if len(probes) > sump.MAX_CHANNELS:
                raise PcitraceError(f"{len(probes)} probes asked for; SUMP devices have {sump.MAX_CHANNELS}",
                                    fix="choose up to 32 lines")
            chosen = [by_name[p] for p in probes]
        if not chosen:
            raise PcitraceError("the capture has no channels to play back", path=capture.path,
                                fix="choose another capture")
        if fault_mode not in ("close", "hang"):
            raise PcitraceError(f"unknown fault mode {fault_mode!r}", fix="use 'close' or 'hang'")
        if memory < 4:
            raise PcitraceError(f"sample memory of {memory} bytes is too small", fix="use --memory 4 or more")
        self.capture = capture
        self.lines = chosen
        if clock_line is None and capture.timebase.mode == "timing":
            clock_line = next((ln[0] for ln in lines if ln[0].upper().split(".")[-1] in ("CLK", "PCICLK", "CLOCK")),
                              None)
        if clock_line is not None and clock_line not in by_name:
            raise PcitraceError(f"no line named {clock_line!r} for the external clock", path=capture.path,
                                fix="name a 1-bit line of the capture")
        self.clock_line = by_name[clock_line] if clock_line else None
        probe_count = min(sump.MAX_CHANNELS, -(-len(chosen) // 8) * 8)
        self.info = sump.DeviceInfo(name=name, fpga_version="pcitrace-emu", probes=probe_count,
                                    sample_memory=int(memory), max_rate_hz=int(max_rate_hz),
                                    protocol_version=2)
        self.fault_after = fault_after
        # A link speed (e.g. 11520 for 115200 baud); None: as fast as the pty takes it.
        self.bytes_per_s = bytes_per_s
        self._credit_at = None
        self.fault_mode = fault_mode
        self.received = bytearray()
        self.log: list[tuple[int, int | None]] = []
        self.sent_total = 0          # every byte written to the pty
        self.sent_data = 0           # sample-data bytes of the current transfer
        self.faulted = False
        self.port: str | None = None
        self._master = self._slave = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._world_cache: dict = {}
        self._times = None
        self._reset_state()

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> "SumpEmulator":
        master, slave = os.openpty()
        # Raw: no echo, no CR/NL mapping, no ^C or XON/XOFF interpretation of sample bytes.
        tty.setraw(slave, termios.TCSANOW)
        tty.setraw(master, termios.TCSANOW)
        os.set_blocking(master, False)
        self._master, self._slave = master, slave
        self.port = os.ttyname(slave)
        self._thread = threading.Thread(target=self._serve, name="sump-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._close_fds()

    def request_stop(self) -> None:
        """Ask the serving thread to end (safe from a signal handler)."""
        self._stop.set()

    def wait(self) -> None:
        """Serve until stopped (or until a fault closes the pty)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=0.2)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _close_fds(self) -> None:
        for attr in ("_master", "_slave"):
            fd = getattr(self, attr)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, attr, None)

    # -- device state -----------------------------------------------------------------
    def _reset_state(self) -> None:
        self.stages = [_Stage() for _ in range(sump.NUM_STAGES)]
        self.divider = 0
        self.flags = sump.Flags()
        self.read_quads = 1
        self.delay_quads = 1
        self._pending = bytearray()   # data queued for the client
        self._data_at = None          # offset in _pending where sample data begins
        self._paused = False
        self.armed = False

    def _handle(self, cmd: int, arg: int | None) -> None:
        self.log.append((cmd, arg))
        if cmd == sump.CMD_RESET:
            if self._pending:
                # Abandon the transfer and what the client has not read of it.
                termios.tcflush(self._slave, termios.TCIFLUSH)
            self._reset_state()
        elif cmd == sump.CMD_ID:
            self._pending += sump.ID_REPLY
        elif cmd == sump.CMD_METADATA:
            self._pending += sump.encode_metadata(self.info)
        elif cmd == sump.CMD_XOFF:
            self._paused = True
        elif cmd == sump.CMD_XON:
            self._paused = False
        elif cmd == sump.CMD_ARM:
            self.armed = True
            data = self._acquire()
            if data is not None:
                self._data_at = len(self._pending)
                self.sent_data = 0
                self._pending += data
                self.armed = False
        elif cmd == sump.CMD_DIVIDER:
            self.divider = arg & sump.MAX_DIVIDER
        elif cmd == sump.CMD_READ_DELAY:
            self.read_quads = (arg & 0xFFFF) + 1
            self.delay_quads = (arg >> 16) + 1
        elif cmd == sump.CMD_READ_COUNT:
            self.read_quads = arg + 1
        elif cmd == sump.CMD_DELAY_COUNT:
            self.delay_quads = arg + 1
        elif cmd == sump.CMD_FLAGS:
            self.flags = sump.Flags.decode(arg)
        elif 0xC0 <= cmd <= 0xCF:
            st = self.stages[(cmd - 0xC0) >> 2]
            setattr(st, ("mask", "value", "config", "config")[(cmd - 0xC0) & 3], arg)
            st.configured = True
        # other commands (Demon-core extensions, unknown) are ignored, as a plain OLS does

    # -- playback -----------------------------------------------------------------------
    @property
    def rate_hz(self) -> float:
        return sump.rate_for(self.divider, self.flags.demux)

    def _words_at(self, src: np.ndarray) -> np.ndarray:
        data = self.capture.read(sorted({ln[1] for ln in self.lines}))
        w = np.zeros(len(src), np.uint32)
        for k, (_, chan, bit) in enumerate(self.lines):
            arr = data[chan][src]
            w |= (((arr >> arr.dtype.type(bit)) & 1).astype(np.uint32) << np.uint32(k))
        return w

    def clocked_world(self, falling: bool = False) -> np.ndarray:
        """Probe words, one per external clock edge."""
        key = ("ext", falling)
        if key in self._world_cache:
            return self._world_cache[key]
        cap = self.capture
        if cap.timebase.mode == "state":
            src = np.arange(cap.num_samples)
        elif self.clock_line is None:
            w = np.zeros(0, np.uint32)
            self._world_cache = {key: w}
            return w
        else:
            _, chan, bit = self.clock_line
            clk = cap.read([chan])[chan]
            clk = ((clk >> clk.dtype.type(bit)) & 1).astype(np.int8)
            edge = np.diff(clk) == (-1 if falling else 1)
            # the first sample after the edge, as pcitrace reads timing captures (docs/records.md)
            src = np.flatnonzero(edge) + 1
        w = self._words_at(src) if len(src) else np.zeros(0, np.uint32)
        self._world_cache = {key: w}
        return w

    def world(self, rate_hz: float) -> np.ndarray:
        """Probe words (uint32) as the device samples the capture at ``rate_hz``."""
        if rate_hz in self._world_cache:
            return self._world_cache[rate_hz]
        cap = self.capture
        if self._times is None:
            self._times = cap.times_ps()
        times = self._times
        if cap.num_samples == 0:
            w = np.zeros(1, np.uint32)
        else:
            span = int(times[-1] - times[0])
            n = span * rate_hz // 10**12 + 1
            t = times[0] + np.rint(np.arange(int(n)) * (1e12 / rate_hz)).astype(np.int64)
            src = np.searchsorted(times, t, side="right") - 1
            w = self._words_at(src)
        self._world_cache = {rate_hz: w}
        return w

    def _stage_matches(self, w: np.ndarray, st: sump.TriggerStage) -> np.ndarray:
        mask = np.uint32(st.mask)
        value = np.uint32(st.value)
        if not st.serial:
            return ((w ^ value) & mask) == 0
        bits = ((w >> np.uint32(st.channel)) & 1).astype(np.uint32)
        shift = np.zeros(len(w), np.uint32)
        top = int(st.mask).bit_length()
        for j in range(top):   # newest sample in bit 0, one shift per register bit
            if j == 0:
                shift |= bits
            elif j < len(bits):
                shift[j:] |= bits[:-j] << np.uint32(j)
        return ((shift ^ value) & mask) == 0

    def find_trigger(self, w: np.ndarray) -> int | None:
        """Sample index where the trigger sequence starts the capture, or None."""
        stages = [s.trigger for s in self.stages if s.configured]
        matches = [self._stage_matches(w, s) for s in stages]
        level, pos = 0, 0
        for _ in range(sump.NUM_STAGES + 1):
            best = None
            for st, m in zip(stages, matches):
                if st.level != level:
                    continue
                hits = np.flatnonzero(m[pos:])
                if len(hits):
                    at = pos + int(hits[0])
                    if best is None or at < best[0]:
                        best = (at, st)
            if best is None:
                return None
            at, st = best
            fire = at + st.delay
            if st.start:
                return fire
            level += 1
            pos = fire + 1
            if pos >= len(w):
                return None
        return None

    def _acquire(self) -> bytes | None:
        groups = self.flags.groups
        if not any(groups):
            return b""
        if self.flags.external_clock:
            w = self.clocked_world(self.flags.invert_clock)
            if len(w) == 0:
                return None     # no clock on the clock input: nothing is ever sampled
        else:
            w = self.world(self.rate_hz)
        trig = self.find_trigger(w)
        if trig is None:
            return None     # armed for ever, as a device whose trigger never comes
        ngroups = self.flags.group_count
        read = 4 * self.read_quads
        # The memory is a ring: capture stops `delay` samples after the trigger and the device
        # can return no more than the ring holds, the newest samples.
        read = min(read, self.info.max_samples(ngroups) // 4 * 4)
        delay = 4 * self.delay_quads
        if self.flags.rle:
            entries, sample_entry = sump.rle_encode(w, groups)
            end = int(sample_entry[min(trig, len(w) - 1)]) + delay
            window = _take_held(entries, end - read, end, hold_value=self._last_value(entries))
        else:
            end = trig + delay
            window = _take_held(w, end - read, end)
        return sump.words_to_bytes(window[::-1], groups)

    def _last_value(self, entries: np.ndarray) -> int:
        flag = np.uint32(1 << sump.rle_flag_bit(self.flags.groups))
        vals = np.flatnonzero((entries & flag) == 0)
        return int(entries[vals[-1]]) if len(vals) else 0

    # -- the serving loop ---------------------------------------------------------------
    def _serve(self) -> None:
        inbuf = bytearray()
        master = self._master
        try:
            while not self._stop.is_set():
                want_write = bool(self._pending) and not self._paused and not self.faulted
                r, w, _ = select.select([master], [master] if want_write else [], [], 0.05)
                if r:
                    try:
                        chunk = os.read(master, 4096)
                    except OSError as exc:
                        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                            chunk = b""
                        elif exc.errno == errno.EIO:
                            continue
                        else:
                            raise
                    if self.faulted:
                        continue
                    self.received += chunk
                    inbuf += chunk
                    self._parse(inbuf)
                if w and self._pending and not self.faulted:
                    self._write(master)
                    if self.faulted and self.fault_mode == "close":
                        self._drain_then_close()
                        return
        except OSError:
            # The pty broke under us (e.g. closed by stop()); nothing is left to serve.
            if not self._stop.is_set():
                raise

    def _drain_then_close(self, limit_s: float = 2.0) -> None:
        """Close the pty once the client has read what was sent: Linux drops a pty's unread
        bytes when the master closes, and the cable is pulled after they crossed it."""
        deadline = time.monotonic() + limit_s
        quiet = 0
        # The kernel moves written bytes to the reader's queue asynchronously, so an empty
        # queue must stay empty for a few polls before it means "read".
        while time.monotonic() < deadline and not self._stop.is_set() and quiet < 5:
            waiting = struct.unpack("i", fcntl.ioctl(self._slave, termios.FIONREAD, b"\0\0\0\0"))[0]
            quiet = quiet + 1 if waiting == 0 else 0
            time.sleep(0.01)
        self._close_fds()

    def _parse(self, inbuf: bytearray) -> None:
        while inbuf:
            cmd = inbuf[0]
            if cmd & 0x80:
                if len(inbuf) < 5:
                    return
                arg = int.from_bytes(inbuf[1:5], "little")
                del inbuf[:5]
            else:
                arg = None
                del inbuf[:1]
            self._handle(cmd, arg)

    def _write(self, master: int) -> None:
        n = min(len(self._pending), 4096)
        if self.bytes_per_s:
            now = time.monotonic()
            if self._credit_at is None or now - self._credit_at > 0.5:
                self._credit_at = now - 1.0 / self.bytes_per_s
            n = min(n, int((now - self._credit_at) * self.bytes_per_s))
            if n <= 0:
                time.sleep(min(0.01, 1.0 / self.bytes_per_s))
                return
            self._credit_at += n / self.bytes_per_s
        if self.fault_after is not None and self._data_at is not None:
            n = min(n, max(0, self._data_at + self.fault_after - self.sent_data))
            if n == 0:
                self.faulted = True
                return
        try:
            done = os.write(master, bytes(self._pending[:n]))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                return
            raise
        del self._pending[:done]
        self.sent_total += done
        if self._data_at is not None:
            # sent_data counts from the start of the reply that precedes the data, so the
            # fault threshold above is measured in sample bytes.
            self.sent_data += done


def _take_held(a: np.ndarray, start: int, stop: int, hold_value: int | None = None) -> np.ndarray:
    """a[start:stop], holding the first value before the start and the last after the end."""
    n = len(a)
    lo, hi = max(start, 0), min(stop, n)
    parts = []
    if start < 0:
        parts.append(np.full(min(-start, stop - start), a[0], a.dtype))
    if hi > lo:
        parts.append(a[lo:hi])
    if stop > n:
        tail = int(a[-1]) if hold_value is None else hold_value
        parts.append(np.full(min(stop - n, stop - start), tail, a.dtype))
    return np.concatenate(parts) if parts else np.zeros(0, a.dtype)
