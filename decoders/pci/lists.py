##
## This file is part of the pcitrace project (libsigrokdecode protocol decoder "pci").
##
## SPDX-License-Identifier: GPL-3.0-or-later
##
# The facts every PCI reader shares: command names, terminations, DEVSEL# speeds and the
# record field layout. pcitrace.decode.facts loads this very file, so the sigrok decoder
# and the fast engine cannot drift apart. Keep it free of imports.

# C/BE#[3:0] during the address phase -> (snake_case name, display name)
PCI_COMMANDS = {
    0x0: ('int_ack', 'Interrupt Acknowledge'),
    0x1: ('special', 'Special Cycle'),
    0x2: ('io_read', 'I/O Read'),
    0x3: ('io_write', 'I/O Write'),
    0x4: ('reserved_4', 'Reserved (4)'),
    0x5: ('reserved_5', 'Reserved (5)'),
    0x6: ('mem_read', 'Memory Read'),
    0x7: ('mem_write', 'Memory Write'),
    0x8: ('reserved_8', 'Reserved (8)'),
    0x9: ('reserved_9', 'Reserved (9)'),
    0xA: ('config_read', 'Configuration Read'),
    0xB: ('config_write', 'Configuration Write'),
    0xC: ('mem_read_multiple', 'Memory Read Multiple'),
    0xD: ('dac', 'Dual Address Cycle'),
    0xE: ('mem_read_line', 'Memory Read Line'),
    0xF: ('mem_write_invalidate', 'Memory Write and Invalidate'),
}

# PCI-X mode 1 reuses the encodings with other meanings.
PCIX_COMMANDS = {
    0x0: ('int_ack', 'Interrupt Acknowledge'),
    0x1: ('special', 'Special Cycle'),
    0x2: ('io_read', 'I/O Read'),
    0x3: ('io_write', 'I/O Write'),
    0x4: ('reserved_4', 'Reserved (4)'),
    0x5: ('device_id_message', 'Device ID Message'),
    0x6: ('mem_read_dword', 'Memory Read DWORD'),
    0x7: ('mem_write', 'Memory Write'),
    0x8: ('mem_read_block_alias', 'Alias to Memory Read Block'),
    0x9: ('mem_write_block_alias', 'Alias to Memory Write Block'),
    0xA: ('config_read', 'Configuration Read'),
    0xB: ('config_write', 'Configuration Write'),
    0xC: ('split_completion', 'Split Completion'),
    0xD: ('dac', 'Dual Address Cycle'),
    0xE: ('mem_read_block', 'Memory Read Block'),
    0xF: ('mem_write_block', 'Memory Write Block'),
}

# PCI-X DWORD commands: the attribute phase's C/BE#[3:0] are byte enables, not byte count.
PCIX_DWORD_COMMANDS = (0x2, 0x3, 0x6, 0xA, 0xB)

COMMAND_UNKNOWN = 'unknown'   # control-only capture: no C/BE#

DEVSEL_SPEEDS = ('fast', 'medium', 'slow', 'subtractive', 'none')

TERMINATIONS = (
    'normal', 'retry', 'disconnect_with_data', 'disconnect_without_data',
    'target_abort', 'master_abort', 'split_response', 'truncated',
)

# Record fields, in order, with a type letter: i = integer, u = unsigned 64-bit integer,
# b = bool, s = string. The fast engine builds its numpy dtype from this; the sigrok
# decoder writes its JSON lines with exactly these keys (plus start_sample/end_sample).
RECORD_FIELDS = (
    ('bus', 's'),
    ('start_ps', 'i'),
    ('end_ps', 'i'),
    ('clocks', 'i'),
    ('command', 's'),
    ('dac', 'b'),
    ('address', 'u'),
    ('data_phases', 'i'),
    ('bytes', 'i'),
    ('devsel', 's'),
    ('termination', 's'),
    ('initiator_waits', 'i'),
    ('target_waits', 'i'),
    ('parity_error', 'b'),
    ('width', 'i'),
    ('gnt', 'i'),
    ('tag', 'i'),
    ('requester', 'i'),
    ('byte_count', 'i'),
    ('relaxed_ordering', 'b'),
    ('no_snoop', 'b'),
    ('data_index', 'i'),
)

FINDING_KINDS = (
    'trdy_without_devsel', 'stop_without_devsel', 'irdy_without_transaction',
    'command_changed_in_wait', 'byte_enables_changed_in_wait', 'initial_latency',
    'frame_reasserted', 'parity_error', 'glitch', 'devsel_late',
)

# DEVSEL# first asserted more than this many clocks after the last header clock is a finding:
# 4 is the subtractive decode slot, and a master that saw no DEVSEL# by then has ended the
# transaction with Master-Abort (PCI 2.3 3.3.3.1), so a later DEVSEL# claims nothing.
# Without C/BE# a DAC's second address phase cannot be told from a wait, so one clock more is
# legal there (a DAC claimed by subtractive decode shows DEVSEL# 5 clocks after its first phase).
MAX_DEVSEL_CLOCKS = 4

# More than this many clocks from the address phase to the first data phase is a finding
# (PCI 2.3 section 3.5.1.1: initial latency of a target <= 16 clocks).
MAX_INITIAL_LATENCY = 16
