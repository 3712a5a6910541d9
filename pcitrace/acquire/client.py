"""A SUMP / OLS client on pyserial: plan a capture, check it, run it, turn the bytes into a Capture.

The request is checked twice before it can reach a device: :func:`check_request` applies
what no SUMP device can do (run before the port is even opened), :func:`plan_capture`
what this device cannot do (after its metadata, before any configuration byte).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import numpy as np

from pcitrace.acquire import sump
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.errors import PcitraceError

DEFAULT_BAUD = 115200
MIN_RATE_HZ = sump.CLOCK_HZ / (sump.MAX_DIVIDER + 1)
ABSOLUTE_MAX_RATE_HZ = 2 * sump.CLOCK_HZ
# 32-bit read counts of 4-sample units are the protocol's own ceiling.
ABSOLUTE_MAX_SAMPLES = 4 << 32


@dataclasses.dataclass
class CaptureRequest:
    """What the user asked for.

    ``channels``: probe index -> channel name, in the order they go into the capture
    (empty: every probe the device has, named CH0, CH1, ...).
    ``stages``: trigger stages (empty: start at once). ``pretrigger``: fraction of the
    samples kept from before the trigger. ``external_clock``: one sample per edge of the
    device's clock input (a state capture; the divider is unused).
    """

    rate_hz: float
    samples: int
    channels: dict[int, str]
    stages: list[sump.TriggerStage] = dataclasses.field(default_factory=list)
    pretrigger: float = 0.1
    rle: bool = False
    # State capture: sample on the device's external clock input (e.g. the PCI CLK); rate_hz
    # is then that clock's frequency, used only for the time base.
    external_clock: bool = False
    invert_clock: bool = False


@dataclasses.dataclass
class CapturePlan:
    request: CaptureRequest
    info: sump.DeviceInfo
    divider: int
    demux: bool
    rate_hz: float                    # what the device will actually sample at
    flags: sump.Flags
    read_quads: int
    delay_quads: int
    stages: list[sump.TriggerStage]
    triggered: bool                   # False: stage 0 forced to start at once

    @property
    def samples(self) -> int:
        return 4 * self.read_quads

    @property
    def trigger_index(self) -> int | None:
        """Index of the trigger sample in the full read window (time order), if any."""
        if not self.triggered:
            return None
        return 4 * (self.read_quads - self.delay_quads)

    @property
    def bytes_expected(self) -> int:
        return self.samples * self.flags.group_count

    def commands(self) -> bytes:
        """The configuration sent after reset, before arming."""
        out = bytearray()
        for s, stage in enumerate(self.stages):
            out += stage.commands(s)
        out += sump.long_command(sump.CMD_DIVIDER, self.divider)
        out += sump.count_commands(self.read_quads, self.delay_quads, self.info.extended_counts)
        out += sump.long_command(sump.CMD_FLAGS, self.flags.encode())
        return bytes(out)


def _refuse(message: str, fix: str) -> PcitraceError:
    return PcitraceError(message, where="capture request", fix=fix)


def check_request(req: CaptureRequest) -> None:
    """Refuse what no SUMP device can do (no device needed)."""
    for idx, name in req.channels.items():
        if not 0 <= idx < sump.MAX_CHANNELS:
            raise _refuse(f"channel {name!r} is on probe {idx}; SUMP devices have probes 0-31",
                          "use a probe number between 0 and 31")
    names = list(req.channels.values())
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _refuse(f"channel names {dup} are given to more than one probe", "give each probe its own name")
    if not MIN_RATE_HZ <= req.rate_hz <= ABSOLUTE_MAX_RATE_HZ:
        raise _refuse(f"rate {req.rate_hz:g} Hz is outside what the SUMP divider reaches "
                      f"({MIN_RATE_HZ:.3g} Hz to {ABSOLUTE_MAX_RATE_HZ / 1e6:g} MHz)",
                      "choose a rate in that range")
    if req.samples < 1 or req.samples > ABSOLUTE_MAX_SAMPLES:
        raise _refuse(f"{req.samples} samples cannot be requested over SUMP", "ask for 1 to 2^34 samples")
    if not 0.0 <= req.pretrigger < 1.0:
        raise _refuse(f"pre-trigger fraction {req.pretrigger} is not in [0, 1)", "use a percentage below 100")
    if len(req.stages) > sump.NUM_STAGES:
        raise _refuse(f"{len(req.stages)} trigger stages; SUMP devices have {sump.NUM_STAGES}",
                      "combine conditions into at most 4 stages")
    for s, st in enumerate(req.stages):
        if st.serial and not 0 <= st.channel < sump.MAX_CHANNELS:
            raise _refuse(f"serial trigger stage {s} watches probe {st.channel}", "use a probe 0-31")


def plan_capture(req: CaptureRequest, info: sump.DeviceInfo) -> CapturePlan:
    """Fit the request to this device or refuse it; nothing is sent."""
    check_request(req)
    if not req.channels:
        req = dataclasses.replace(req, channels={i: f"CH{i}" for i in range(min(info.probes, sump.MAX_CHANNELS))})
    for idx, name in req.channels.items():
        if idx >= info.probes:
            raise _refuse(f"channel {name!r} is on probe {idx} but {info.name} has {info.probes} probes "
                          f"(0-{info.probes - 1})", "move the channel to an existing probe")
    if req.rate_hz > info.max_rate_hz:
        raise _refuse(f"rate {req.rate_hz / 1e6:g} MHz is above {info.name}'s maximum of "
                      f"{info.max_rate_hz / 1e6:g} MHz", f"use --rate {info.max_rate_hz} or less")
    if req.external_clock:
        divider, demux, actual = 0, False, float(req.rate_hz)
    else:
        divider, demux, actual = sump.divider_for(req.rate_hz)
    groups = [False] * 4
    for idx in req.channels:
        groups[idx // sump.GROUP_BITS] = True
    for st in req.stages:
        if st.serial:
            groups[st.channel // sump.GROUP_BITS] = True
    if req.rle:
        top = max(g for g in range(4) if groups[g])
        flag = sump.GROUP_BITS * top + sump.GROUP_BITS - 1
        if flag in req.channels:
            # The top bit of the highest group sent marks run-length counts; one more group
            # (sent but unused) moves that flag off the user's channel.
            if top + 1 >= 4 or sump.GROUP_BITS * (top + 1) >= info.probes:
                raise _refuse(f"with run-length encoding probe {flag} ({req.channels[flag]!r}) carries the "
                              "count flag", "move that channel to another probe or capture without --rle")
            groups[top + 1] = True
    if demux and (groups[2] or groups[3]):
        raise _refuse(f"rates above {sump.CLOCK_HZ / 1e6:g} MHz use demux mode, which has probes 0-15 only",
                      f"capture probes 0-15 only or use --rate {sump.CLOCK_HZ} or less")
    ngroups = sum(groups)
    memory = info.max_samples(ngroups)
    read_quads = math.ceil(req.samples / 4)
    if 4 * read_quads > memory:
        raise _refuse(f"{req.samples} samples of {ngroups} channel group(s) do not fit {info.name}'s "
                      f"{info.sample_memory} bytes of sample memory (at most {memory // 4 * 4} samples)",
                      f"use --samples {memory // 4 * 4} or fewer, or capture fewer channel groups")
    if not info.extended_counts and read_quads > 0x10000:
        raise _refuse(f"{req.samples} samples exceed the 16-bit read count of {info.name}",
                      "use --samples 262144 or fewer")
    if req.stages:
        delay_quads = max(1, read_quads - int(round(read_quads * req.pretrigger)))
        stages = list(req.stages)
        triggered = True
    else:
        delay_quads = read_quads
        stages = [sump.TriggerStage(mask=0, value=0, level=0, start=True)]
        triggered = False
    flags = sump.Flags(demux=demux, groups=tuple(groups), rle=req.rle, external_clock=req.external_clock,
                       invert_clock=req.invert_clock and req.external_clock)
    return CapturePlan(req, info, divider, demux, actual, flags, read_quads, delay_quads, stages, triggered)


@dataclasses.dataclass
class Acquisition:
    """The outcome of a capture, whole or not.

    ``capture`` holds the samples read (time order; a cut transfer keeps the newest part of
    the window, because devices send the last sample first); ``error`` is set when the
    device went away or stopped answering; ``interrupted`` when the user stopped it.
    """

    capture: Capture | None
    plan: CapturePlan
    complete: bool
    interrupted: bool = False
    error: PcitraceError | None = None
    bytes_read: int = 0


# progress(stage, done, total): stage is "trigger" (done = seconds waited) or "read" (bytes)
Progress = Callable[[str, float, float], None]


class SumpClient:
    """One serial connection to a SUMP device."""

    def __init__(self, port: str, baudrate: int = DEFAULT_BAUD, timeout_s: float = 1.0):
        import serial

        self.port = port
        self.timeout_s = timeout_s
        try:
            self.ser = serial.Serial(port, baudrate=baudrate, timeout=timeout_s, write_timeout=timeout_s)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise PcitraceError(f"cannot open serial port {port}: {exc}",
                                fix="check the port name (ls /dev/ttyACM* /dev/ttyUSB*) and your permissions") from None
        self.ser.reset_input_buffer()

    def close(self) -> None:
        try:
            self.ser.close()
        except Exception:  # noqa: BLE001 - a vanished port cannot be closed any better
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- low level --------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        import serial

        try:
            self.ser.write(data)
            self.ser.flush()
        except (serial.SerialException, OSError) as exc:
            raise PcitraceError(f"writing to {self.port} failed: {exc}",
                                fix="check the device is plugged in") from None

    def _read_exact(self, n: int, what: str) -> bytes:
        import serial

        deadline = time.monotonic() + self.timeout_s
        buf = bytearray()
        try:
            while len(buf) < n and time.monotonic() < deadline:
                buf += self.ser.read(n - len(buf))
        except (serial.SerialException, OSError) as exc:
            raise PcitraceError(f"reading {what} from {self.port} failed: {exc}",
                                fix="check the device is plugged in") from None
        if len(buf) < n:
            raise PcitraceError(f"{self.port} did not answer the {what} request within {self.timeout_s:g} s "
                                f"(got {len(buf)} of {n} bytes)",
                                fix="check this is a SUMP / OLS logic analyser and that it is not busy")
        return bytes(buf)

    def reset(self) -> None:
        self.send(bytes([sump.CMD_RESET]) * 5)

    def identify(self) -> str:
        self.ser.reset_input_buffer()
        self.send(bytes([sump.CMD_ID]))
        reply = self._read_exact(4, "identify (0x02)")
        if reply != sump.ID_REPLY:
            raise PcitraceError(f"{self.port} answered identify with {reply!r}, not {sump.ID_REPLY!r}",
                                fix="this does not look like a SUMP / OLS analyser; check the port")
        return reply.decode("ascii")

    def metadata(self) -> sump.DeviceInfo:
        import serial

        self.send(bytes([sump.CMD_METADATA]))
        parser = sump.MetadataParser()
        deadline = time.monotonic() + self.timeout_s
        try:
            while not parser.done and time.monotonic() < deadline:
                chunk = self.ser.read(max(1, self.ser.in_waiting))
                if chunk:
                    parser.feed(chunk)
        except (serial.SerialException, OSError) as exc:
            raise PcitraceError(f"reading metadata from {self.port} failed: {exc}",
                                fix="check the device is plugged in") from None
        if not parser.done:
            # The original SUMP core has no metadata command: keep its published figures.
            return sump.DeviceInfo(name="SUMP device without metadata")
        return parser.info

    def connect(self) -> sump.DeviceInfo:
        self.reset()
        # Let a device that was mid-transfer stop before its leftovers are thrown away.
        time.sleep(0.05)
        self.identify()
        return self.metadata()

    # -- a capture --------------------------------------------------------------------
    def run(self, plan: CapturePlan, *, wait_s: float | None = None, idle_timeout_s: float = 2.0,
            progress: Progress | None = None) -> tuple[bytearray, bool, bool, PcitraceError | None]:
        """Configure, arm and read. Returns (raw bytes in stream order, complete, interrupted, error)."""
        import serial

        self.reset()
        self.send(plan.commands())
        self.ser.reset_input_buffer()
        self.send(bytes([sump.CMD_ARM]))
        total = plan.bytes_expected
        buf = bytearray()
        armed_at = time.monotonic()
        last_data = None
        error = None
        interrupted = False
        self.ser.timeout = 0.1
        try:
            while len(buf) < total:
                try:
                    # Ask only for what is waiting (or one byte): pyserial drops the bytes of
                    # an unfinished read() when the port vanishes, and those are the samples
                    # a cut transfer must keep.
                    chunk = self.ser.read(min(total - len(buf), max(1, self.ser.in_waiting)))
                except (serial.SerialException, OSError) as exc:
                    error = PcitraceError(
                        f"{self.port} went away after {len(buf)} of {total} bytes ({exc})",
                        fix="check the cable; the samples read so far were kept")
                    break
                now = time.monotonic()
                if chunk:
                    buf += chunk
                    last_data = now
                    if progress:
                        progress("read", len(buf), total)
                elif last_data is None:
                    if progress:
                        progress("trigger", now - armed_at, wait_s or 0)
                    if wait_s is not None and now - armed_at > wait_s:
                        error = PcitraceError(f"no trigger within {wait_s:g} s",
                                              fix="check the trigger condition and the probes, or wait longer with --wait")
                        break
                elif now - last_data > idle_timeout_s:
                    error = PcitraceError(
                        f"{self.port} stopped sending after {len(buf)} of {total} bytes "
                        f"(nothing for {idle_timeout_s:g} s)",
                        fix="check the cable and the device; the samples read so far were kept")
                    break
        except KeyboardInterrupt:
            interrupted = True
        finally:
            try:
                self.ser.timeout = self.timeout_s
            except (serial.SerialException, OSError):
                pass    # the port is gone; the error above says so
        if error is not None or interrupted:
            try:   # stop the device so the next capture starts clean
                self.reset()
            except PcitraceError:
                pass
        return buf, len(buf) >= total, interrupted, error


def decode_samples(raw: bytes | bytearray, plan: CapturePlan) -> tuple[np.ndarray, int | None]:
    """Raw stream bytes -> (uint32 probe words in time order, trigger sample index or None).

    A cut transfer keeps the newest part of the window (devices send the last sample
    first), so the trigger moves back by what was lost, or is gone.
    """
    groups = plan.flags.groups
    stream = sump.words_from_bytes(raw, groups)
    lost = 4 * plan.read_quads - len(stream)       # samples, or RLE entries, never received
    k = None if plan.trigger_index is None else plan.trigger_index - lost
    if not plan.flags.rle:
        return stream[::-1].copy(), (k if k is not None and 0 <= k < len(stream) else None)
    words = sump.rle_decode_stream(stream, groups)[::-1].copy()
    trig = None
    if k is not None and 0 <= k < len(stream):
        # The trigger is the k-th memory entry (oldest first); it starts the run of the value
        # it holds. Samples before it: one per value entry plus every count, except counts
        # at the very start that lost their value to the cut.
        entries = stream[::-1]
        flag = np.uint32(1 << sump.rle_flag_bit(groups))
        is_count = (entries & flag) != 0
        if not is_count[k]:
            contrib = np.where(is_count, sump.rle_count_of(entries, groups, sump.rle_flag_bit(groups)), 1)
            first_value = int(np.argmax(~is_count))
            contrib[:first_value] = 0
            trig = int(contrib[:k].astype(np.int64).sum())
    return words, trig


def to_capture(words: np.ndarray, plan: CapturePlan, *, complete: bool, port: str | None = None,
               trigger_sample: int | None = None) -> Capture:
    """Probe words (time order) -> a Capture (timing, or state with an external clock) with one
    uint8 array per requested channel."""
    arrays = {name: ((words >> np.uint32(idx)) & 1).astype(np.uint8)
              for idx, name in plan.request.channels.items()}
    trig = trigger_sample
    meta = {
        "source": "sump",
        "device": plan.info.name,
        "port": port,
        "samplerate_hz": plan.rate_hz,
        "external_clock": plan.flags.external_clock,
        "probes": {name: idx for idx, name in plan.request.channels.items()},
        "complete": complete,
        "rle": plan.flags.rle,
        "trigger_sample": trig,
    }
    # An external clock gives one sample per bus clock: a state capture at that clock.
    tb = TimeBase.state(clock_hz=plan.rate_hz) if plan.flags.external_clock else TimeBase.timing(plan.rate_hz)
    return Capture.from_arrays(arrays, tb, metadata=meta)


def acquire(port: str, req: CaptureRequest, *, baudrate: int = DEFAULT_BAUD, timeout_s: float = 1.0,
            wait_s: float | None = None, progress: Progress | None = None,
            on_plan: Callable[[CapturePlan], None] | None = None) -> Acquisition:
    """Capture ``req`` from the SUMP device on ``port``.

    Refuses impossible requests with PcitraceError before sending anything that configures
    the device (and before opening the port for what no SUMP device can do). A device that
    vanishes or stalls mid-transfer, or a Ctrl-C, still returns the samples read so far.
    """
    check_request(req)
    with SumpClient(port, baudrate, timeout_s) as client:
        info = client.connect()
        plan = plan_capture(req, info)
        if on_plan:
            on_plan(plan)
        raw, complete, interrupted, error = client.run(plan, wait_s=wait_s, idle_timeout_s=max(timeout_s, 0.5),
                                                       progress=progress)
    words, trig = decode_samples(raw, plan)
    capture = to_capture(words, plan, complete=complete, port=port, trigger_sample=trig) if len(words) else None
    return Acquisition(capture, plan, complete, interrupted, error, len(raw))
