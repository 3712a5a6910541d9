##
## This file is part of the pcitrace project (libsigrokdecode protocol decoder "pci").
##
## SPDX-License-Identifier: GPL-3.0-or-later
##

import json
from operator import mul
import sigrokdecode as srd
from .lists import (PCI_COMMANDS, PCIX_COMMANDS, PCIX_DWORD_COMMANDS, COMMAND_UNKNOWN,
                    RECORD_FIELDS, MAX_INITIAL_LATENCY, MAX_DEVSEL_CLOCKS)

# libsigrokdecode 0.5.3 hands 255 for an optional channel that is not connected;
# self.has_channel() exists there but crashes sigrok-cli at exit.
ABSENT = 255

# Channel indices: required first, then optional, in the order of the tuples below.
FRAME, IRDY, TRDY, STOP, DEVSEL = range(5)
CLK = 5
AD0 = 6
CBE0 = AD0 + 64
PAR, PAR64, REQ64, ACK64, IDSEL, REQ, GNT, PERR, SERR = range(CBE0 + 8, CBE0 + 17)

(A_ADDR, A_DAC, A_ATTR, A_DATA, A_IWAIT, A_TWAIT, A_STOP,
 A_CMD, A_CFG, A_PCIX, A_WORD, A_MSG, A_TERM, A_DEVSEL, A_WARN) = range(15)

CMD_DAC = 0xD
CMD_SPLIT_COMPLETION = 0xC
CMD_CONFIG = (0xA, 0xB)

DEVSEL_NAMES = {1: 'fast', 2: 'medium', 3: 'slow'}

# PCI-X split completion message classes / indices (PCI-X 1.0b, split completion messages).
SCM_CLASSES = {0: 'Write completion', 1: 'Bridge error', 2: 'Completer error'}
SCM_INDEX = {
    (0, 0x00): 'normal completion',
    (1, 0x00): 'master abort', (1, 0x01): 'target abort', (1, 0x02): 'write data parity error',
    (2, 0x00): 'byte count out of range', (2, 0x01): 'split write data parity error',
}

# Edge-sensitive control lines watched for glitches and idle wake-ups in timing mode.
CONTROL = (FRAME, IRDY, TRDY, STOP, DEVSEL)
CONTROL_NAMES = ('FRAME#', 'IRDY#', 'TRDY#', 'STOP#', 'DEVSEL#')


def popcount(x):
    return bin(x).count('1')


# Bit weights: a bus value is sum(map(mul, pins[slice], weights)), the cheapest way to
# assemble up to 64 pin values in pure Python.
W_LO = tuple(1 << i for i in range(32))
W_HI = tuple(1 << i for i in range(32, 64))
W_BE = tuple(1 << i for i in range(8))


def ones_to_bytes(mask, nbits):
    # Byte enables are asserted low: count the zero bits.
    return nbits - popcount(mask & ((1 << nbits) - 1))


class Txn:
    '''One transaction being decoded (see docs/records.md for every rule used here).'''

    def __init__(self, index, sample):
        self.index = index            # clock counter of the start clock
        self.ss = sample
        self.last_sample = sample
        self.last_index = index
        self.code = None              # C/BE#[3:0] of the (last) address phase
        self.command = COMMAND_UNKNOWN
        self.dac = False
        self.address = 0
        self.addr_lo = None           # AD[31:0] of the first address phase (None: no AD)
        self.header_left = 0          # header clocks still to come (DAC 2nd phase, attribute)
        self.pending_dac = False
        self.pending_attr = False
        self.req64 = False
        self.gnt = -1
        self.width = None
        self.h_index = index          # clock counter of the last header clock H
        self.devsel_index = None
        self.devsel_seen = False
        self.data_phases = 0
        self.bytes = 0
        self.iwaits = 0
        self.twaits = 0
        self.stop_k = None            # data phases completed before the first S&D clock
        self.data_with_stop = False
        self.target_abort = False
        self.split_response = False
        self.parity_error = False
        self.tag = -1
        self.requester = -1
        self.byte_count = -1
        self.relaxed_ordering = False
        self.no_snoop = False
        self.scm = False
        self.words = []               # (sample, value, byte_enables)
        self.prev_data_clock = None   # (I asserted, data completed, C/BE#) of the previous data clock
        self.trdy_flagged = False
        self.stop_flagged = False
        self.latency_checked = False
        self.attr_text = None


class Decoder(srd.Decoder):
    api_version = 3
    id = 'pci'
    name = 'PCI'
    longname = 'PCI / PCI-X local bus'
    desc = 'Conventional PCI (32/64-bit) and PCI-X mode 1 bus transactions.'
    license = 'gplv3+'
    inputs = ['logic']
    outputs = ['pci']
    tags = ['PC']
    channels = (
        {'id': 'frame', 'name': 'FRAME#', 'desc': 'Cycle frame'},
        {'id': 'irdy', 'name': 'IRDY#', 'desc': 'Initiator ready'},
        {'id': 'trdy', 'name': 'TRDY#', 'desc': 'Target ready'},
        {'id': 'stop', 'name': 'STOP#', 'desc': 'Stop'},
        {'id': 'devsel', 'name': 'DEVSEL#', 'desc': 'Device select'},
    )
    optional_channels = (
        {'id': 'clk', 'name': 'CLK', 'desc': 'Bus clock (not needed with clock=none)'},
    ) + tuple(
        {'id': 'ad%d' % i, 'name': 'AD%d' % i, 'desc': 'Address/data bit %d' % i}
        for i in range(64)
    ) + tuple(
        {'id': 'cbe%d' % i, 'name': 'C/BE%d#' % i, 'desc': 'Command/byte enable %d' % i}
        for i in range(8)
    ) + (
        {'id': 'par', 'name': 'PAR', 'desc': 'Parity of AD[31:0], C/BE#[3:0]'},
        {'id': 'par64', 'name': 'PAR64', 'desc': 'Parity of AD[63:32], C/BE#[7:4]'},
        {'id': 'req64', 'name': 'REQ64#', 'desc': 'Request 64-bit transfer'},
        {'id': 'ack64', 'name': 'ACK64#', 'desc': 'Acknowledge 64-bit transfer'},
        {'id': 'idsel', 'name': 'IDSEL', 'desc': 'Initialization device select'},
        {'id': 'req', 'name': 'REQ#', 'desc': 'Bus request (of the watched master)'},
        {'id': 'gnt', 'name': 'GNT#', 'desc': 'Bus grant (of the watched master)'},
        {'id': 'perr', 'name': 'PERR#', 'desc': 'Parity error'},
        {'id': 'serr', 'name': 'SERR#', 'desc': 'System error'},
    )
    options = (
        {'id': 'clock', 'desc': 'Bus clock: CLK rising edges, or every sample (state capture)',
            'default': 'clk', 'values': ('clk', 'none')},
        {'id': 'mode', 'desc': 'Bus protocol', 'default': 'pci', 'values': ('pci', 'pcix')},
        {'id': 'width', 'desc': 'Bus width when REQ64#/ACK64# are not captured',
            'default': 32, 'values': (32, 64)},
        {'id': 'bus', 'desc': 'Bus name written into the records', 'default': 'pci'},
    )
    annotations = (
        ('addr-phase', 'Address phase'),
        ('dac-phase', 'Second address phase (DAC)'),
        ('attr-phase', 'Attribute phase (PCI-X)'),
        ('data-phase', 'Data phase'),
        ('initiator-wait', 'Initiator wait state'),
        ('target-wait', 'Target wait state'),
        ('stop-clock', 'Termination clock'),
        ('command', 'Command and address'),
        ('config', 'Configuration address fields'),
        ('pcix-attr', 'PCI-X attributes'),
        ('data-word', 'Data word'),
        ('split-message', 'Split completion message'),
        ('termination', 'Termination'),
        ('devsel-speed', 'DEVSEL# speed'),
        ('warning', 'Protocol finding'),
    )
    annotation_rows = (
        ('phases', 'Phases', (A_ADDR, A_DAC, A_ATTR, A_DATA, A_IWAIT, A_TWAIT, A_STOP)),
        ('commands', 'Commands and addresses', (A_CMD, A_CFG, A_PCIX)),
        ('data', 'Data', (A_WORD, A_MSG)),
        ('terminations', 'Terminations', (A_TERM, A_DEVSEL)),
        ('warnings', 'Warnings', (A_WARN,)),
    )
    binary = (
        ('json', 'JSON lines: transactions, data words, findings'),
    )

    def __init__(self):
        # libsigrokdecode 0.5.3 does not call reset() before decoding.
        self.reset()

    def reset(self):
        self.samplerate = None
        self.txn = None
        self.prev = None              # (F, I, T, S, D) of the last processed clock
        self.prev_gnt = None
        self.partial = True           # inside the transaction the capture started in
        self.outside_irdy = False
        self.clock_count = 0
        self.records = 0
        self.word_count = 0
        self.pending_parity = []      # phases whose PAR comes on the next clock
        self.clock_anns = []          # (class, texts) of the last clock, flushed at the next one
        self.last_clock_sample = None
        self.edges = [0, 0, 0, 0, 0]
        self.edge_samples = [[None, None] for _ in range(5)]   # (second-to-last, last) edge

    def edge(self, i):
        self.edges[i] += 1
        e = self.edge_samples[i]
        e[0], e[1] = e[1], self.samplenum

    def metadata(self, key, value):
        if key == srd.SRD_CONF_SAMPLERATE:
            self.samplerate = value

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)
        self.out_python = self.register(srd.OUTPUT_PYTHON)
        self.out_binary = self.register(srd.OUTPUT_BINARY)
        self.pcix = self.options['mode'] == 'pcix'
        self.bus_width = int(self.options['width'])
        self.bus = self.options['bus']
        self.commands = PCIX_COMMANDS if self.pcix else PCI_COMMANDS

    # -- helpers ------------------------------------------------------------------------

    def ps(self, sample):
        if not self.samplerate:
            return -1
        return int(round(sample * 1e12 / self.samplerate))

    def ann(self, ss, es, cls, texts):
        self.put(ss, es, self.out_ann, [cls, texts])

    def emit_json(self, ss, es, obj):
        self.put(ss, es, self.out_binary, [0, (json.dumps(obj) + '\n').encode()])

    def finding(self, sample, kind, message):
        f = {'sample': sample, 'time_ps': self.ps(sample), 'bus': self.bus,
             'kind': kind, 'message': message}
        self.ann(sample, sample + 1, A_WARN, [message, kind])
        self.put(sample, sample + 1, self.out_python, ['FINDING', dict(f)])
        self.emit_json(sample, sample + 1, {'finding': f})

    def probe_channels(self, pins):
        present = lambda idx: pins[idx] != ABSENT
        self.has_ad = all(present(AD0 + i) for i in range(32))
        self.has_ad64 = self.has_ad and all(present(AD0 + i) for i in range(32, 64))
        self.has_cbe = all(present(CBE0 + i) for i in range(4))
        self.has_cbe64 = self.has_cbe and all(present(CBE0 + i) for i in range(4, 8))
        self.has_par = present(PAR) and self.has_ad and self.has_cbe
        self.has_par64 = present(PAR64) and self.has_ad64 and self.has_cbe64
        self.has_64ctl = present(REQ64) and present(ACK64)
        self.has_gnt = present(GNT)
        self.has_clk = present(CLK)

    def ad32(self, pins):
        return sum(map(mul, pins[AD0:AD0 + 32], W_LO))

    def ad_hi(self, pins):
        return sum(map(mul, pins[AD0 + 32:AD0 + 64], W_HI))

    def cbe(self, pins, n=4):
        return sum(map(mul, pins[CBE0:CBE0 + n], W_BE))

    # -- the decode loop ------------------------------------------------------------------

    def decode(self):
        pins = self.wait()
        self.probe_channels(pins)
        clocked = self.options['clock'] == 'clk'
        if clocked and not self.has_clk:
            raise Exception('option clock=clk needs the CLK channel; '
                            'map it (clk=...) or use clock=none for a state-mode capture')
        try:
            if clocked:
                self.decode_timing(pins)
            else:
                self.decode_state(pins)
        except EOFError:
            # Newer libsigrokdecode ends the data this way (0.5.3 never does): the
            # transaction still running is reported as truncated, as docs/records.md says.
            if self.txn is not None:
                self.finish(self.txn, self.txn.last_sample + 1, truncated=True)
                self.txn = None

    def decode_state(self, pins):
        # Every sample is a clock. While the bus is idle, let libsigrokdecode skip to the
        # next sample on which a control line is asserted (or GNT# changes).
        idle_conds = [{FRAME: 'l'}, {IRDY: 'l'}, {TRDY: 'l'}, {STOP: 'l'}, {DEVSEL: 'l'}]
        if self.has_gnt:
            idle_conds.append({GNT: 'e'})
        step = {'skip': 1}
        while True:
            idle = self.clock(self.samplenum, pins)
            pins = self.wait(idle_conds if idle else step)

    def decode_timing(self, pins):
        # A clock is a CLK rising edge. Edges of the control lines are watched as well:
        # two edges of one line within a clock period are a glitch, and while idle the
        # first edge (or a GNT# edge) ends the skip over idle clocks. The {CLK: 'r', X: 'e'}
        # conditions tell whether an edge fell exactly on a clock sample.
        step = [{CLK: 'r'}] + [{x: 'e'} for x in CONTROL]
        watch = CONTROL + ((GNT,) if self.has_gnt else ())
        n = len(watch)
        idle_conds = [{x: 'e'} for x in watch] + [{CLK: 'r', x: 'e'} for x in watch]
        idle = False
        while True:
            if idle:
                pins = self.wait(idle_conds)
                m = self.matched
                for i in range(5):
                    if m[i]:
                        self.edge(i)
                is_clock = any(m[n:])
            else:
                pins = self.wait(step)
                m = self.matched
                for i in range(5):
                    if m[i + 1]:
                        self.edge(i)
                is_clock = m[0]
            if is_clock:
                idle = self.clock(self.samplenum, pins)
            else:
                idle = False

    # -- one bus clock ---------------------------------------------------------------------

    def clock(self, s, pins):
        '''Process one bus clock; returns True when the bus is idle and nothing is pending.'''
        F = pins[FRAME] == 0
        I = pins[IRDY] == 0
        T = pins[TRDY] == 0
        S = pins[STOP] == 0
        D = pins[DEVSEL] == 0
        first = self.prev is None
        self.clock_count += 1

        if any(self.edges):
            for i, n in enumerate(self.edges):
                if n >= 2:
                    # Reported where the line's last pulse began (its second-to-last edge).
                    self.finding(self.edge_samples[i][0], 'glitch',
                                 '%s changed %d times within one clock period'
                                 % (CONTROL_NAMES[i], n))
            self.edges = [0, 0, 0, 0, 0]

        if self.clock_anns:
            for cls, ss, texts in self.clock_anns:
                self.ann(ss, s, cls, texts)
            self.clock_anns = []

        if self.pending_parity:
            self.check_parity(pins)

        if first:
            start = F and not I
        else:
            start = F and not self.prev[0]
        idle_clock = not F and not I

        if self.txn is not None and (start or idle_clock):
            self.finish(self.txn, s)
            self.txn = None

        if self.partial and (start or idle_clock):
            self.partial = False

        if start:
            if not first:
                pF, pI, pT, pS, pD = self.prev
                # Without DEVSEL# the master ended its own transaction (Master-Abort):
                # nothing was pending.
                if pI and pD and not pF and not pT and not pS:
                    self.finding(s, 'frame_reasserted',
                                 'FRAME# asserted again while the final data phase is pending')
            self.start_txn(s, pins)
        elif self.txn is not None:
            self.txn_clock(self.txn, s, pins, F, I, T, S, D)
        elif not self.partial:
            if I and not F:
                if not self.outside_irdy:
                    self.finding(s, 'irdy_without_transaction', 'IRDY# asserted with no transaction')
                self.outside_irdy = True
            else:
                self.outside_irdy = False

        self.prev = (F, I, T, S, D)
        if self.has_gnt:
            self.prev_gnt = pins[GNT]
        return (self.txn is None and not self.partial and not F and not I and not T and not S
                and not D and not self.pending_parity)

    def start_txn(self, s, pins):
        t = Txn(self.clock_count, s)
        self.txn = t
        self.outside_irdy = False
        if self.has_gnt:
            t.gnt = 0 if self.prev_gnt is None else (1 if self.prev_gnt == 0 else 0)
        if self.has_64ctl:
            t.req64 = pins[REQ64] == 0
        ad = self.ad32(pins) if self.has_ad else None
        t.addr_lo = ad
        if ad is not None:
            t.address = ad
        texts = ['Address phase', 'Addr', 'A']
        if self.has_cbe:
            code = self.cbe(pins)
            t.code = code
            t.command = self.commands[code][0]
            if code == CMD_DAC:
                t.dac = True
                t.pending_dac = True
                t.header_left += 1
                texts = ['Address phase 1 (DAC)', 'DAC 1', 'A']
        if self.pcix:
            t.pending_attr = True
            t.header_left += 1
        if self.has_par:
            self.pending_parity.append((t, s, 'address phase', ad, self.cbe(pins), None, None))
        self.clock_anns.append((A_ADDR, s, texts))

    def header_clock(self, t, s, pins):
        if t.pending_dac:
            t.pending_dac = False
            if self.has_ad:
                hi = self.ad32(pins)
                t.address = (hi << 32) | (t.addr_lo or 0)
            if self.has_cbe:
                code = self.cbe(pins)
                t.code = code
                t.command = self.commands[code][0]
            if self.has_par:
                self.pending_parity.append((t, s, 'second address phase', self.ad32(pins),
                                            self.cbe(pins), None, None))
            self.clock_anns.append((A_DAC, s, ['Address phase 2 (DAC)', 'DAC 2', 'A']))
        elif t.pending_attr:
            t.pending_attr = False
            self.attribute_phase(t, s, pins)
            if self.has_par:
                self.pending_parity.append((t, s, 'attribute phase', self.ad32(pins),
                                            self.cbe(pins), None, None))
            self.clock_anns.append((A_ATTR, s, ['Attribute phase', 'Attr', 'At']))
        t.h_index = self.clock_count
        t.header_left -= 1

    def attribute_phase(self, t, s, pins):
        if not (self.has_ad and self.has_cbe and t.code is not None):
            return
        ad = self.ad32(pins)
        cbe = self.cbe(pins)
        code = t.code
        if code == CMD_SPLIT_COMPLETION:
            # The sequence being completed is named by the address phase (requester ID,
            # tag, RO); the attribute phase carries the completer's ID and byte count.
            a = t.addr_lo
            t.tag = (a >> 24) & 0x1F
            t.requester = (a >> 8) & 0xFFFF
            t.relaxed_ordering = bool((a >> 30) & 1)
            t.no_snoop = False
            bc = (ad & 0xFF) | (cbe << 8)
            t.byte_count = bc if bc else 4096
            t.scm = bool((ad >> 29) & 1)
            comp = (ad >> 8) & 0xFFFF
            flags = []
            if (ad >> 31) & 1:
                flags.append('BCM')
            if (ad >> 30) & 1:
                flags.append('SCE')
            if t.scm:
                flags.append('SCM')
            text = 'Split completion: requester %02x:%02x.%d tag %d, completer %02x:%02x.%d, %d bytes%s' % (
                t.requester >> 8, (t.requester >> 3) & 0x1F, t.requester & 7, t.tag,
                comp >> 8, (comp >> 3) & 0x1F, comp & 7, t.byte_count,
                (' ' + ' '.join(flags)) if flags else '')
        else:
            t.tag = (ad >> 24) & 0x1F
            t.requester = (ad >> 8) & 0xFFFF
            t.no_snoop = bool((ad >> 29) & 1)
            t.relaxed_ordering = bool((ad >> 30) & 1)
            if code in PCIX_DWORD_COMMANDS:
                t.byte_count = ones_to_bytes(cbe, 4)
            else:
                bc = (ad & 0xFF) | (cbe << 8)
                t.byte_count = bc if bc else 4096
            flags = [f for f, on in (('RO', t.relaxed_ordering), ('NS', t.no_snoop)) if on]
            text = 'Requester %02x:%02x.%d tag %d, %d bytes%s' % (
                t.requester >> 8, (t.requester >> 3) & 0x1F, t.requester & 7, t.tag,
                t.byte_count, (' ' + ' '.join(flags)) if flags else '')
        t.attr_text = [text, 'tag %d, %d B' % (t.tag, t.byte_count)]

    def txn_clock(self, t, s, pins, F, I, T, S, D):
        t.last_sample = s
        t.last_index = self.clock_count
        if t.header_left > 0:
            self.header_clock(t, s, pins)
            return
        n = self.clock_count
        if D and t.devsel_index is None:
            t.devsel_index = n
            self.check_devsel_late(t, s, n - t.h_index)
            if t.width is None:
                if self.has_64ctl:
                    t.width = 64 if (t.req64 and pins[ACK64] == 0) else 32
                else:
                    t.width = self.bus_width
        completed = I and T and D
        if completed:
            width = t.width
            wide = width == 64
            if self.has_ad:
                value = self.ad32(pins)
                if wide and self.has_ad64:
                    value |= self.ad_hi(pins)
            else:
                value = 0
            if self.has_cbe:
                if wide and self.has_cbe64:
                    be = self.cbe(pins, 8)
                    nbytes = ones_to_bytes(be, 8)
                else:
                    be = self.cbe(pins)
                    nbytes = ones_to_bytes(be, 4) + (4 if wide else 0)
            else:
                be = 0
                nbytes = width // 8
            t.data_phases += 1
            t.bytes += nbytes
            t.words.append((s, value, be))
            if S:
                t.data_with_stop = True
            if self.has_par:
                # has_par implies AD[31:0] and C/BE#[3:0]; has_par64 the upper halves too.
                par64 = (value >> 32, be >> 4) if (wide and self.has_par64) else None
                self.pending_parity.append((t, s, 'data phase %d' % t.data_phases,
                                            value & 0xFFFFFFFF, be & 0xF, par64, None))
            if not t.latency_checked:
                t.latency_checked = True
                if n - t.index > MAX_INITIAL_LATENCY:
                    self.finding(s, 'initial_latency',
                                 'first data phase %d clocks after the address phase (> %d)'
                                 % (n - t.index, MAX_INITIAL_LATENCY))
            word = '%0*X' % (16 if wide else 8, value) if self.has_ad else 'data'
            self.clock_anns.append((A_WORD, s, ['%s BE#=%X' % (word, be), word]
                                    if self.has_cbe else [word]))
            if self.pcix and t.code == CMD_SPLIT_COMPLETION and t.scm and self.has_ad:
                self.split_message(s, value & 0xFFFFFFFF)
            self.clock_anns.append((A_DATA, s, ['Data phase %d' % t.data_phases, 'Data', 'D']))
        elif S or (self.pcix and T and not D and t.devsel_seen):
            self.clock_anns.append((A_STOP, s, ['Termination clock', 'Stop', 'S']))
        elif not I:
            t.iwaits += 1
            self.clock_anns.append((A_IWAIT, s, ['Initiator wait', 'IWait', 'I']))
        else:
            t.twaits += 1
            self.clock_anns.append((A_TWAIT, s, ['Target wait', 'TWait', 'T']))

        if S and D and t.stop_k is None:
            t.stop_k = t.data_phases - (1 if completed else 0)
        if not D:
            if self.pcix and T and t.devsel_seen:
                t.split_response = True
            elif T and not t.trdy_flagged:
                t.trdy_flagged = True
                self.finding(s, 'trdy_without_devsel', 'TRDY# asserted without DEVSEL#')
            if S:
                if t.devsel_seen:
                    t.target_abort = True
                elif not t.stop_flagged:
                    t.stop_flagged = True
                    self.finding(s, 'stop_without_devsel', 'STOP# asserted without DEVSEL#')
        else:
            t.devsel_seen = True

        # C/BE# must hold still while IRDY# is asserted within one data phase.
        if self.has_cbe:
            cbe = self.cbe(pins, 8 if self.has_cbe64 else 4)
            p = t.prev_data_clock
            if I and p is not None and p[0] and not p[1] and p[2] != cbe:
                self.finding(s, 'byte_enables_changed_in_wait',
                             'C/BE# changed from %X to %X during a wait state' % (p[2], cbe))
            t.prev_data_clock = (I, completed or S, cbe)

    def check_devsel_late(self, t, s, n):
        # The record still says subtractive; the finding says the claim came after the
        # slot in which a master aborts (lists.MAX_DEVSEL_CLOCKS). Without C/BE# a DAC is not
        # recognised, so its second address phase counts as one of the n clocks.
        limit = MAX_DEVSEL_CLOCKS + (0 if self.has_cbe else 1)
        if n > limit:
            header = ('attribute phase' if self.pcix and t.h_index > t.index
                      else 'second address phase' if t.dac and t.h_index > t.index
                      else 'address phase')
            self.finding(s, 'devsel_late',
                         'DEVSEL# first asserted %d clocks after the %s: later than '
                         'subtractive decode (%d), when the master aborts'
                         % (n, header, limit))

    def split_message(self, s, v):
        cls = (v >> 28) & 0xF
        idx = (v >> 20) & 0xFF
        name = SCM_INDEX.get((cls, idx))
        if name is None and cls == 2 and idx & 0x80:
            name = 'device-specific error'
        text = 'Split completion message: %s, %s (class %d, index 0x%02X), remaining byte count %d' % (
            SCM_CLASSES.get(cls, 'reserved class'), name or 'reserved index', cls, idx, v & 0xFFF)
        self.clock_anns.append((A_MSG, s, [text, 'SCM %d/0x%02X' % (cls, idx)]))

    def check_parity(self, pins):
        par = pins[PAR]
        par64 = pins[PAR64]
        for t, s, what, ad, cbe, hi, _ in self.pending_parity:
            bad = []
            if (popcount(ad) + popcount(cbe) + par) & 1:
                bad.append('PAR')
            if hi is not None and (popcount(hi[0]) + popcount(hi[1]) + par64) & 1:
                bad.append('PAR64')
            if bad:
                t.parity_error = True
                self.finding(s, 'parity_error', '%s parity error on the %s'
                             % (' and '.join(bad), what))
        self.pending_parity = []

    # -- end of a transaction --------------------------------------------------------------

    def finish(self, t, next_sample, truncated=False):
        if t.devsel_index is None:
            devsel = 'none'
        else:
            n = t.devsel_index - t.h_index
            devsel = DEVSEL_NAMES.get(n, 'subtractive')
        if truncated:
            termination = 'truncated'
        elif t.devsel_index is None:
            termination = 'master_abort'
        elif self.pcix and t.split_response:
            termination = 'split_response'
        elif t.target_abort:
            termination = 'target_abort'
        elif t.stop_k is None:
            termination = 'normal'
        elif t.data_with_stop:
            termination = 'disconnect_with_data'
        elif t.stop_k == 0:
            termination = 'retry'
        else:
            termination = 'disconnect_without_data'
        width = t.width
        if width is None:
            width = 32 if self.has_64ctl else self.bus_width
        rec = {
            'bus': self.bus,
            'start_ps': self.ps(t.ss),
            'end_ps': self.ps(t.last_sample),
            'clocks': t.last_index - t.index + 1,
            'command': t.command,
            'dac': t.dac,
            'address': t.address,
            'data_phases': t.data_phases,
            'bytes': t.bytes,
            'devsel': devsel,
            'termination': termination,
            'initiator_waits': t.iwaits,
            'target_waits': t.twaits,
            'parity_error': t.parity_error,
            'width': width,
            'gnt': t.gnt,
            'tag': t.tag,
            'requester': t.requester,
            'byte_count': t.byte_count,
            'relaxed_ordering': t.relaxed_ordering,
            'no_snoop': t.no_snoop,
            'data_index': self.word_count,
        }
        ss, es = t.ss, next_sample
        index = self.records
        for ws, value, be in t.words:
            self.emit_json(ws, ws + 1, {'word': {'record': index, 'sample': ws,
                                                 'time_ps': self.ps(ws), 'value': value,
                                                 'byte_enables': be}})
        self.word_count += len(t.words)
        self.records += 1
        line = dict((name, rec[name]) for name, _ in RECORD_FIELDS)
        line['start_sample'] = t.ss
        line['end_sample'] = t.last_sample
        self.emit_json(ss, es, line)
        py = dict(line, words=list(t.words))
        self.put(ss, es, self.out_python, ['TRANSACTION', py])

        cmd_name = self.commands[t.code][1] if t.code is not None else 'Transaction'
        if self.has_ad:
            addr = ('%016X' if t.dac else '%08X') % t.address
            self.ann(ss, es, A_CMD, ['%s @ %s' % (cmd_name, addr), '%s %s' % (t.command, addr),
                                     addr])
        else:
            self.ann(ss, es, A_CMD, [cmd_name, t.command])
        if t.code in CMD_CONFIG and self.has_ad:
            self.config_fields(ss, es, t.addr_lo)
        if t.attr_text:
            self.ann(ss, es, A_PCIX, t.attr_text)
        self.ann(ss, es, A_TERM, ['%s, %d data phase%s, %d bytes' % (
            termination.replace('_', ' '), t.data_phases, '' if t.data_phases == 1 else 's',
            t.bytes), termination])
        self.ann(ss, es, A_DEVSEL, ['DEVSEL# %s' % devsel, devsel])

    def config_fields(self, ss, es, a):
        typ = a & 3
        reg = (a >> 2) & 0x3F
        fn = (a >> 8) & 7
        if typ == 0:
            text = 'Type 0: function %d, register 0x%02X' % (fn, reg << 2)
        elif typ == 1:
            text = 'Type 1: bus %d, device %d, function %d, register 0x%02X' % (
                (a >> 16) & 0xFF, (a >> 11) & 0x1F, fn, reg << 2)
        else:
            text = 'Configuration address with reserved type %d' % typ
        self.ann(ss, es, A_CFG, [text, 'Type %d' % typ])
