##
## This file is part of the pcitrace project (libsigrokdecode protocol decoder "pci").
##
## SPDX-License-Identifier: GPL-3.0-or-later
##

'''
Conventional PCI (32/64-bit) and PCI-X mode 1 bus transactions.

Sampling: option "clock" = "clk" reads every signal at each rising edge of CLK (timing
captures); "none" treats every sample as one bus clock (state captures from an analyser
with a PCI probe, or pcitrace's clocked view of a VCD). FRAME#, IRDY#, TRDY#, STOP# and
DEVSEL# are required; AD, C/BE#, PAR, PAR64, REQ64#, ACK64#, GNT# are optional: without
AD / C/BE# (a control-only capture) the transactions, phases, waits, DEVSEL# speed and
terminations are still decoded. The rules are those of pcitrace's docs/records.md.

Annotation rows: phases (address / DAC / attribute / data / waits / stop, one per clock),
commands (command + address, configuration fields, PCI-X attributes), data (data words
with byte enables, split completion messages), terminations (termination + DEVSEL#
speed), warnings (protocol findings; decoding goes on after them).

OUTPUT_PYTHON (for stacked decoders), put over the transaction / phase:
  ['TRANSACTION', rec]  rec: dict with every record field of lists.RECORD_FIELDS
                        plus 'start_sample', 'end_sample' and 'words': a list of
                        (sample, value, byte_enables) for the completed data phases.
  ['FINDING', f]        f: dict time_ps, sample, bus, kind (lists.FINDING_KINDS), message.

Binary class "json" (sigrok-cli -B pci=json): one JSON object per line.
  - a transaction: exactly the keys of lists.RECORD_FIELDS plus start_sample and
    end_sample (samples of its first and last clock);
  - {"word": {"record", "sample", "time_ps", "value", "byte_enables"}} for each completed
    data phase, written just before the transaction it belongs to ("record" is the
    transaction's index in this stream, counted from 0);
  - {"finding": {"sample", "time_ps", "bus", "kind", "message"}} for each protocol finding,
    written when it is found.
Times are samplenum * 1e12 / samplerate rounded (-1 without a sample rate); pcitrace maps
the samples through the capture's own time base instead.

Findings (warnings row, FINDING, "finding" lines), per docs/records.md: trdy_without_devsel,
stop_without_devsel (not in a target abort), irdy_without_transaction, byte_enables_changed_in_wait,
initial_latency (> 16 clocks to the first data phase), frame_reasserted, parity_error (PAR or
PAR64 wrong on the clock after an address, attribute or completed data phase) and, with
clock=clk, glitch (a control line changing twice between two CLK edges). C/BE# carry the
command on the address clock only, so command_changed_in_wait is never raised: a C/BE#
change while a data phase waits is byte_enables_changed_in_wait.

libsigrokdecode 0.5.3 never reports the end of the data, so a transaction still running
on the last clock of a capture is not written there; libsigrokdecode versions whose wait()
raises EOFError at the end get it with termination "truncated".
'''

from .pd import Decoder
