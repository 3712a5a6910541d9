"""The SUMP / Open Bench Logic Sniffer wire protocol: byte formats shared by client and emulator.

Everything here is pure (bytes in, bytes or numpy arrays out) so the client (``client.py``)
and the emulated analyser (``emulator.py``) cannot disagree about a format.

Wire summary (SUMP as extended by the OLS and Demon cores):
- short commands are one byte below 0x80: reset 0x00 (sent five times, so a device stuck
  half-way through a long command is flushed), arm 0x01, identify 0x02 (answer "1ALS"),
  metadata 0x04, XON 0x11, XOFF 0x13;
- long commands are one byte >= 0x80 followed by a 32-bit little-endian argument:
  divider 0x80 (rate = 100 MHz / (divider + 1), doubled in demux mode), read & delay
  count 0x81 (two 16-bit counts of 4-sample units, each minus one), flags 0x82, and for
  devices with more than 256 KiB of memory the 32-bit delay 0x83 / read 0x84 counts;
  trigger mask / value / configuration of stage s at 0xC0 / 0xC1 / 0xC2 + 4 * s;
- metadata is a list of tokens ending in 0x00; the top three bits of a token give its type:
  0 = NUL-terminated string, 1 = 32-bit big-endian integer, 2 = 8-bit integer;
- sample data comes back last sample first, one byte per enabled channel group (group 0
  first); in RLE mode a word with its top bit set is a count of extra repetitions of the
  value that follows it in the stream (the one before it in time).
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np

from pcitrace.errors import PcitraceError

CLOCK_HZ = 100_000_000          # the SUMP reference clock; the divider counts it
MAX_DIVIDER = (1 << 24) - 1
MAX_CHANNELS = 32
GROUP_BITS = 8
NUM_STAGES = 4

CMD_RESET = 0x00
CMD_ARM = 0x01
CMD_ID = 0x02
CMD_METADATA = 0x04
CMD_XON = 0x11
CMD_XOFF = 0x13
CMD_DIVIDER = 0x80
CMD_READ_DELAY = 0x81
CMD_FLAGS = 0x82
CMD_DELAY_COUNT = 0x83          # extended 32-bit format
CMD_READ_COUNT = 0x84           # extended 32-bit format
CMD_TRIGGER_MASK = 0xC0
CMD_TRIGGER_VALUE = 0xC1
CMD_TRIGGER_CONFIG = 0xC2

ID_REPLY = b"1ALS"
# Beyond this much sample memory the 16-bit counts of 0x81 cannot address it all, and
# devices that big (Pepino, Demon core) take the 32-bit 0x83 / 0x84 counts instead.
EXTENDED_COUNT_MEMORY = 256 * 1024

FLAG_DEMUX = 1 << 0
FLAG_NOISE_FILTER = 1 << 1
FLAG_GROUP_DISABLE_SHIFT = 2    # bits 2..5: 1 disables channel group 0..3
FLAG_EXTERNAL_CLOCK = 1 << 6
FLAG_INVERT_CLOCK = 1 << 7
FLAG_RLE = 1 << 8
FLAG_SWAP_CHANNELS = 1 << 9
FLAG_EXTERNAL_TEST = 1 << 10
FLAG_INTERNAL_TEST = 1 << 11
FLAG_RLE_MODE_SHIFT = 14

# Trigger configuration word
TRIG_DELAY_MASK = 0xFFFF
TRIG_LEVEL_SHIFT = 16
TRIG_CHANNEL_SHIFT = 20
TRIG_SERIAL = 1 << 26
TRIG_START = 1 << 27

TOKEN_END = 0x00
TOKEN_DEVICE_NAME = 0x01
TOKEN_FPGA_VERSION = 0x02
TOKEN_ANCILLARY_VERSION = 0x03
TOKEN_PROBES_LONG = 0x20
TOKEN_SAMPLE_MEMORY = 0x21
TOKEN_DYNAMIC_MEMORY = 0x22
TOKEN_MAX_RATE = 0x23
TOKEN_PROTOCOL_LONG = 0x24
TOKEN_PROBES_SHORT = 0x40
TOKEN_PROTOCOL_SHORT = 0x41


def long_command(cmd: int, value: int) -> bytes:
    if not 0x80 <= cmd <= 0xFF:
        raise ValueError(f"0x{cmd:02x} is not a long command")
    return bytes([cmd]) + struct.pack("<I", value & 0xFFFFFFFF)


# -- device description -------------------------------------------------------------------
@dataclasses.dataclass
class DeviceInfo:
    """What a device says about itself in its metadata (absent tokens keep the defaults,
    which are the original SUMP / OLS figures)."""

    name: str = "unknown SUMP device"
    fpga_version: str | None = None
    ancillary_version: str | None = None
    probes: int = 32
    sample_memory: int = 24 * 1024      # bytes (OLS: 24 KiB)
    dynamic_memory: int | None = None
    max_rate_hz: int = 200_000_000
    protocol_version: int | None = None
    unknown_tokens: dict = dataclasses.field(default_factory=dict)

    def max_samples(self, groups: int) -> int:
        """Samples the memory holds with ``groups`` channel groups enabled (one byte each)."""
        return self.sample_memory // max(1, groups)

    @property
    def extended_counts(self) -> bool:
        return self.sample_memory > EXTENDED_COUNT_MEMORY


def encode_metadata(info: DeviceInfo) -> bytes:
    out = bytearray()

    def text(token, s):
        if s is not None:
            out.append(token)
            out.extend(s.encode("utf-8") + b"\0")

    text(TOKEN_DEVICE_NAME, info.name)
    text(TOKEN_FPGA_VERSION, info.fpga_version)
    text(TOKEN_ANCILLARY_VERSION, info.ancillary_version)
    out.append(TOKEN_PROBES_LONG)
    out.extend(struct.pack(">I", info.probes))
    out.append(TOKEN_SAMPLE_MEMORY)
    out.extend(struct.pack(">I", info.sample_memory))
    if info.dynamic_memory is not None:
        out.append(TOKEN_DYNAMIC_MEMORY)
        out.extend(struct.pack(">I", info.dynamic_memory))
    out.append(TOKEN_MAX_RATE)
    out.extend(struct.pack(">I", info.max_rate_hz))
    if info.protocol_version is not None:
        out.append(TOKEN_PROTOCOL_SHORT)
        out.append(info.protocol_version & 0xFF)
    out.append(TOKEN_END)
    return bytes(out)


class MetadataParser:
    """Incremental metadata parser: feed bytes as they arrive until ``done``."""

    def __init__(self):
        self.info = DeviceInfo()
        self.done = False
        self._buf = bytearray()
        self._seen = set()

    def feed(self, data: bytes) -> None:
        self._buf.extend(data)
        while not self.done and self._buf:
            key = self._buf[0]
            if key == TOKEN_END:
                self.done = True
                del self._buf[0]
                break
            kind = key >> 5
            if kind == 0:
                end = self._buf.find(b"\0", 1)
                if end < 0:
                    return
                value = bytes(self._buf[1:end]).decode("utf-8", "replace")
                del self._buf[:end + 1]
            elif kind == 1:
                if len(self._buf) < 5:
                    return
                value = struct.unpack(">I", bytes(self._buf[1:5]))[0]
                del self._buf[:5]
            elif kind == 2:
                if len(self._buf) < 2:
                    return
                value = self._buf[1]
                del self._buf[:2]
            else:
                raise PcitraceError(f"device metadata has token 0x{key:02x} of unknown type {kind}",
                                    fix="check the port is a SUMP / OLS analyser and its firmware is current")
            self._apply(key, value)

    def _apply(self, key: int, value) -> None:
        i = self.info
        if key == TOKEN_DEVICE_NAME:
            i.name = value
        elif key == TOKEN_FPGA_VERSION:
            i.fpga_version = value
        elif key == TOKEN_ANCILLARY_VERSION:
            i.ancillary_version = value
        elif key in (TOKEN_PROBES_LONG, TOKEN_PROBES_SHORT):
            i.probes = int(value)
        elif key == TOKEN_SAMPLE_MEMORY:
            i.sample_memory = int(value)
        elif key == TOKEN_DYNAMIC_MEMORY:
            i.dynamic_memory = int(value)
        elif key == TOKEN_MAX_RATE:
            i.max_rate_hz = int(value)
        elif key in (TOKEN_PROTOCOL_LONG, TOKEN_PROTOCOL_SHORT):
            i.protocol_version = int(value)
        else:
            i.unknown_tokens[key] = value
        self._seen.add(key)


def parse_metadata(data: bytes) -> DeviceInfo:
    p = MetadataParser()
    p.feed(data)
    if not p.done:
        raise PcitraceError("device metadata ended without its 0x00 end token",
                            fix="check the cable and that the device is a SUMP / OLS analyser")
    return p.info


# -- flags ------------------------------------------------------------------------------
@dataclasses.dataclass
class Flags:
    demux: bool = False
    noise_filter: bool = False
    groups: tuple[bool, bool, bool, bool] = (True, True, True, True)   # enabled groups
    external_clock: bool = False
    invert_clock: bool = False
    rle: bool = False
    swap_channels: bool = False
    external_test: bool = False
    internal_test: bool = False
    rle_mode: int = 0

    def encode(self) -> int:
        v = 0
        v |= FLAG_DEMUX if self.demux else 0
        v |= FLAG_NOISE_FILTER if self.noise_filter else 0
        for g, on in enumerate(self.groups):
            if not on:
                v |= 1 << (FLAG_GROUP_DISABLE_SHIFT + g)
        v |= FLAG_EXTERNAL_CLOCK if self.external_clock else 0
        v |= FLAG_INVERT_CLOCK if self.invert_clock else 0
        v |= FLAG_RLE if self.rle else 0
        v |= FLAG_SWAP_CHANNELS if self.swap_channels else 0
        v |= FLAG_EXTERNAL_TEST if self.external_test else 0
        v |= FLAG_INTERNAL_TEST if self.internal_test else 0
        v |= (self.rle_mode & 3) << FLAG_RLE_MODE_SHIFT
        return v

    @classmethod
    def decode(cls, v: int) -> "Flags":
        return cls(
            demux=bool(v & FLAG_DEMUX), noise_filter=bool(v & FLAG_NOISE_FILTER),
            groups=tuple(not (v >> (FLAG_GROUP_DISABLE_SHIFT + g)) & 1 for g in range(4)),
            external_clock=bool(v & FLAG_EXTERNAL_CLOCK), invert_clock=bool(v & FLAG_INVERT_CLOCK),
            rle=bool(v & FLAG_RLE), swap_channels=bool(v & FLAG_SWAP_CHANNELS),
            external_test=bool(v & FLAG_EXTERNAL_TEST), internal_test=bool(v & FLAG_INTERNAL_TEST),
            rle_mode=(v >> FLAG_RLE_MODE_SHIFT) & 3)

    @property
    def group_count(self) -> int:
        return sum(self.groups)


# -- triggers ---------------------------------------------------------------------------
@dataclasses.dataclass
class TriggerStage:
    """One SUMP trigger stage.

    Parallel: matches when ``(sample ^ value) & mask == 0``. Serial: the last 32 samples of
    ``channel`` form a shift register (newest in bit 0) compared the same way. A stage is
    watched while the trigger level equals ``level``; on a match it starts the capture
    (``start``) or raises the level by one, ``delay`` samples later.
    """

    mask: int = 0
    value: int = 0
    level: int = 0
    delay: int = 0
    channel: int = 0
    serial: bool = False
    start: bool = True

    def config_word(self) -> int:
        return ((self.delay & TRIG_DELAY_MASK)
                | (self.level & 3) << TRIG_LEVEL_SHIFT
                | (self.channel & 0x1F) << TRIG_CHANNEL_SHIFT
                | (TRIG_SERIAL if self.serial else 0)
                | (TRIG_START if self.start else 0))

    @classmethod
    def from_words(cls, mask: int, value: int, config: int) -> "TriggerStage":
        return cls(mask=mask, value=value, delay=config & TRIG_DELAY_MASK,
                   level=(config >> TRIG_LEVEL_SHIFT) & 3,
                   channel=(config >> TRIG_CHANNEL_SHIFT) & 0x1F,
                   serial=bool(config & TRIG_SERIAL), start=bool(config & TRIG_START))

    def commands(self, stage: int) -> bytes:
        return (long_command(CMD_TRIGGER_MASK + 4 * stage, self.mask)
                + long_command(CMD_TRIGGER_VALUE + 4 * stage, self.value)
                + long_command(CMD_TRIGGER_CONFIG + 4 * stage, self.config_word()))


# -- rates and counts -------------------------------------------------------------------
def divider_for(rate_hz: float) -> tuple[int, bool, float]:
    """(divider, demux, actual rate) for the achievable rate nearest ``rate_hz``.

    Above the 100 MHz reference clock only demux mode (both clock edges, groups 0-1) helps.
    """
    if rate_hz <= 0:
        raise ValueError("rate must be positive")
    demux = rate_hz > CLOCK_HZ
    base = 2 * CLOCK_HZ if demux else CLOCK_HZ
    div = int(round(base / rate_hz)) - 1
    div = min(max(div, 0), MAX_DIVIDER)
    return div, demux, base / (div + 1)


def rate_for(divider: int, demux: bool) -> float:
    return (2 * CLOCK_HZ if demux else CLOCK_HZ) / (divider + 1)


def count_commands(read_quads: int, delay_quads: int, extended: bool) -> bytes:
    """Read / delay counts in units of 4 samples (each sent minus one)."""
    if read_quads < 1 or delay_quads < 1:
        raise ValueError("counts are at least one 4-sample unit")
    if extended:
        return (long_command(CMD_READ_COUNT, read_quads - 1)
                + long_command(CMD_DELAY_COUNT, delay_quads - 1))
    if read_quads > 0x10000 or delay_quads > 0x10000:
        raise ValueError("16-bit counts reach 65536 units of 4 samples")
    return long_command(CMD_READ_DELAY, ((read_quads - 1) & 0xFFFF) | ((delay_quads - 1) & 0xFFFF) << 16)


# -- sample data ------------------------------------------------------------------------
def group_indices(groups) -> list[int]:
    return [g for g in range(4) if groups[g]]


def words_from_bytes(data: bytes | bytearray | memoryview, groups) -> np.ndarray:
    """Whole sample words (uint32, stream order) from raw bytes, enabled groups expanded
    back to their channel positions; a trailing partial word is dropped."""
    idx = group_indices(groups)
    n = len(idx)
    count = len(data) // n
    raw = np.frombuffer(bytes(data[:count * n]), dtype=np.uint8).reshape(count, n)
    words = np.zeros(count, dtype=np.uint32)
    for j, g in enumerate(idx):
        words |= raw[:, j].astype(np.uint32) << np.uint32(GROUP_BITS * g)
    return words


def words_to_bytes(words: np.ndarray, groups) -> bytes:
    idx = group_indices(groups)
    words = np.asarray(words, dtype=np.uint32)
    out = np.empty((len(words), len(idx)), dtype=np.uint8)
    for j, g in enumerate(idx):
        out[:, j] = (words >> np.uint32(GROUP_BITS * g)) & 0xFF
    return out.tobytes()


def rle_flag_bit(groups) -> int:
    """Channel index whose bit marks a run-length count: top bit of the highest enabled group."""
    return GROUP_BITS * max(group_indices(groups)) + GROUP_BITS - 1


def rle_decode_stream(words: np.ndarray, groups) -> np.ndarray:
    """Expand RLE words in stream order (newest first) to samples in stream order.

    A count word (flag bit set) gives extra repetitions of the value that follows it in
    the stream; counts that are not followed by a value (a cut transfer) are dropped.
    Channels below the flag bit are kept in the other groups' positions.
    """
    words = np.asarray(words, dtype=np.uint32)
    if len(words) == 0:
        return words
    flag_bit = rle_flag_bit(groups)
    flag = np.uint32(1 << flag_bit)
    is_count = (words & flag) != 0
    counts = np.where(is_count, rle_count_of(words, groups, flag_bit), 0).astype(np.int64)
    value_pos = np.flatnonzero(~is_count)
    if len(value_pos) == 0:
        return np.zeros(0, np.uint32)
    cum = np.concatenate([[0], np.cumsum(counts)])
    prev_end = np.concatenate([[0], value_pos[:-1] + 1])
    reps = 1 + cum[value_pos] - cum[prev_end]
    total = int(reps.sum())
    if total > (1 << 31):
        raise PcitraceError(f"run-length data expands to {total} samples, more than pcitrace holds in memory",
                            fix="capture without --rle or with fewer samples")
    return np.repeat(words[value_pos], reps)


def rle_count_of(words: np.ndarray, groups, flag_bit: int) -> np.ndarray:
    """The count carried by a count word: its enabled-group bytes packed contiguously,
    flag removed (a count spans the bytes actually sent, whatever their channel positions)."""
    out = np.zeros(len(words), dtype=np.uint64)
    for j, g in enumerate(group_indices(groups)):
        out |= ((words >> np.uint32(GROUP_BITS * g)) & 0xFF).astype(np.uint64) << np.uint64(GROUP_BITS * j)
    nbits = GROUP_BITS * len(group_indices(groups))
    return out & np.uint64((1 << (nbits - 1)) - 1)


def _unpack_low(counts: np.ndarray, groups) -> np.ndarray:
    out = np.zeros(len(counts), dtype=np.uint32)
    counts = np.asarray(counts, dtype=np.uint64)
    for j, g in enumerate(group_indices(groups)):
        out |= ((counts >> np.uint64(GROUP_BITS * j)) & np.uint64(0xFF)).astype(np.uint32) << np.uint32(GROUP_BITS * g)
    return out


def rle_encode(samples: np.ndarray, groups) -> tuple[np.ndarray, np.ndarray]:
    """Run-length encode samples in time order as a device stores them.

    Returns (entries in time order, entry index of each sample's value word). Each run is a
    value word followed, if it lasts more than one sample, by a count word of its extra
    repetitions; runs longer than a count can hold are split. The flag bit of value words
    is cleared (that channel is lost in RLE mode, as on the hardware).
    """
    samples = np.asarray(samples, dtype=np.uint32)
    flag_bit = rle_flag_bit(groups)
    nbits = GROUP_BITS * len(group_indices(groups))
    max_count = (1 << (nbits - 1)) - 1
    keep = np.uint32(sum(0xFF << (GROUP_BITS * g) for g in group_indices(groups)) & ~(1 << flag_bit))
    samples = samples & keep
    n = len(samples)
    if n == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64)
    starts = np.flatnonzero(np.concatenate([[True], samples[1:] != samples[:-1]]))
    lengths = np.diff(np.concatenate([starts, [n]]))
    pieces_per_run = (lengths + max_count) // (max_count + 1)
    run_of_piece = np.repeat(np.arange(len(starts)), pieces_per_run)
    first_piece = np.concatenate([[0], np.cumsum(pieces_per_run)[:-1]])
    k = np.arange(len(run_of_piece)) - first_piece[run_of_piece]
    piece_len = np.minimum(lengths[run_of_piece] - k * (max_count + 1), max_count + 1)
    piece_start = starts[run_of_piece] + k * (max_count + 1)
    has_count = piece_len > 1
    entries_per_piece = 1 + has_count.astype(np.int64)
    value_entry = np.concatenate([[0], np.cumsum(entries_per_piece)[:-1]])
    entries = np.empty(int(entries_per_piece.sum()), dtype=np.uint32)
    entries[value_entry] = samples[piece_start]
    cpos = value_entry[has_count] + 1
    entries[cpos] = _unpack_low(piece_len[has_count] - 1, groups) | np.uint32(1 << flag_bit)
    sample_entry = np.repeat(value_entry, piece_len)
    return entries, sample_entry
