##
## This file is part of the pcitrace project.
##
## SPDX-License-Identifier: GPL-3.0-or-later
##

import json
import sigrokdecode as srd
from .lists import FRAME_FIELDS, LINK_RATES, PREAMBLE_BYTES

# libsigrokdecode 0.5.3 hands 255 for an optional channel that is not connected;
# self.has_channel() exists there but crashes sigrok-cli at exit.
ABSENT = 255

FRAME, SOF, DATA = 0, 1, 2   # required + first optional channel indices
RXD0 = 2
RX_DV, RX_ER, RX_CLK = 10, 11, 12

ANN_FRAME, ANN_SOF, ANN_BYTE, ANN_ETH, ANN_IP, ANN_UDP, ANN_SEQ, ANN_WARN = range(8)


def frame_bytes_from_wire(wire_ps, rate_mbps):
    # Rounded integer arithmetic, identical in pcitrace's fast probe engine.
    n = (wire_ps * rate_mbps + 4000000) // 8000000 - PREAMBLE_BYTES
    return max(n, 0)


class Decoder(srd.Decoder):
    api_version = 3
    id = 'gbe_probe'
    name = 'GbE probe'
    longname = 'Ethernet link probe lines'
    desc = 'Frames on a Gigabit / 10 Gigabit Ethernet link from probe lines (frame-present, SOF, GMII bytes).'
    license = 'gplv3+'
    inputs = ['logic']
    outputs = ['gbe_probe']
    tags = ['Networking', 'PC']
    channels = (
        {'id': 'frame', 'name': 'FRAME', 'desc': 'Frame present on the wire'},
    )
    optional_channels = (
        {'id': 'sof', 'name': 'SOF', 'desc': 'Start-of-frame pulse'},
    ) + tuple(
        {'id': 'rxd%d' % i, 'name': 'RXD%d' % i, 'desc': 'GMII receive data bit %d' % i}
        for i in range(8)
    ) + (
        {'id': 'rx_dv', 'name': 'RX_DV', 'desc': 'GMII receive data valid'},
        {'id': 'rx_er', 'name': 'RX_ER', 'desc': 'GMII receive error'},
        {'id': 'rx_clk', 'name': 'RX_CLK', 'desc': 'GMII receive clock (125 MHz)'},
    )
    options = (
        {'id': 'link', 'desc': 'Link direction name', 'default': 'link'},
        {'id': 'rate', 'desc': 'Link rate', 'default': '1G', 'values': ('1G', '10G')},
        {'id': 'polarity', 'desc': 'Frame / SOF line polarity', 'default': 'active-high',
            'values': ('active-high', 'active-low')},
    )
    annotations = (
        ('frame', 'Frame'),
        ('sof', 'Start of frame'),
        ('byte', 'GMII byte'),
        ('eth', 'Ethernet header'),
        ('ip', 'IPv4 header'),
        ('udp', 'UDP header'),
        ('seq', 'Sequence number'),
        ('warning', 'Warning'),
    )
    annotation_rows = (
        ('frames', 'Frames', (ANN_FRAME, ANN_SOF)),
        ('bytes', 'Bytes', (ANN_BYTE,)),
        ('headers', 'Headers', (ANN_ETH, ANN_IP, ANN_UDP, ANN_SEQ)),
        ('warnings', 'Warnings', (ANN_WARN,)),
    )
    binary = (
        ('json', 'JSON lines, one per frame'),
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.samplerate = None
        self.in_frame = False
        self.ss = None
        self.sof = None
        self.data = []      # (samplenum, byte)
        self.rx_error = False

    def metadata(self, key, value):
        if key == srd.SRD_CONF_SAMPLERATE:
            self.samplerate = value

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)
        self.out_python = self.register(srd.OUTPUT_PYTHON)
        self.out_binary = self.register(srd.OUTPUT_BINARY)
        self.rate_mbps = LINK_RATES[self.options['rate']] // 1000000
        self.active = 1 if self.options['polarity'] == 'active-high' else 0

    def ps(self, samplenum):
        return int(round(samplenum * 1e12 / self.samplerate))

    def decode(self):
        if not self.samplerate:
            raise srd.SamplerateError('Cannot decode without samplerate.')
        pins = self.wait()
        has_sof = pins[SOF] != ABSENT
        has_gmii = all(pins[i] != ABSENT for i in (RX_CLK, RX_DV)) and \
            all(pins[RXD0 + i] != ABSENT for i in range(8))
        has_er = pins[RX_ER] != ABSENT
        assert_edge = 'r' if self.active else 'f'
        release_edge = 'f' if self.active else 'r'
        sof_edge = assert_edge

        # A frame already on the wire at the first sample has no known start: skip it.
        if pins[FRAME] == self.active:
            self.wait({FRAME: release_edge})

        while True:
            self.wait({FRAME: assert_edge})
            self.in_frame = True
            self.ss = self.samplenum
            self.sof = self.samplenum if (has_sof and self.matched_pin(SOF) == self.active) else None
            self.data = []
            self.rx_error = False
            while True:
                conds = [{FRAME: release_edge}]
                if has_sof and self.sof is None:
                    conds.append({SOF: sof_edge})
                if has_gmii:
                    conds.append({RX_CLK: 'r'})
                pins = self.wait(conds)
                m = self.matched
                if m[0]:
                    break
                i = 1
                if has_sof and self.sof is None:
                    if m[i]:
                        self.sof = self.samplenum
                    i += 1
                if has_gmii and m[i] and pins[RX_DV] == 1:
                    byte = 0
                    for b in range(8):
                        byte |= pins[RXD0 + b] << b
                    self.data.append((self.samplenum, byte))
                    if has_er and pins[RX_ER] == 1:
                        self.rx_error = True
            self.in_frame = False
            self.finish_frame(self.ss, self.samplenum)

    def matched_pin(self, idx):
        return self.last_pins[idx]

    def wait(self, conds=None):
        # Remember the pins of every return so the frame-start sample's SOF level is known.
        pins = srd.Decoder.wait(self, conds) if conds is not None else srd.Decoder.wait(self)
        self.last_pins = pins
        return pins

    def finish_frame(self, ss, es):
        rec = dict((name, -1 if kind == 'i' else False if kind == 'b' else 0 if kind == 'u' else '')
                   for name, kind in FRAME_FIELDS)
        start_ps, end_ps = self.ps(ss), self.ps(es)
        rec.update(link=self.options['link'], start_ps=start_ps, end_ps=end_ps,
                   wire_time_ps=end_ps - start_ps, gmii=False, rx_error=self.rx_error,
                   truncated=False)
        rec['frame_bytes'] = frame_bytes_from_wire(end_ps - start_ps, self.rate_mbps)
        rec['sof_ps'] = self.ps(self.sof) if self.sof is not None else -1
        if self.data:
            self.parse_gmii(rec)
        self.put(ss, es, self.out_ann, [ANN_FRAME, [
            'Frame %d B, %.3f us' % (rec['frame_bytes'], rec['wire_time_ps'] / 1e6),
            'Frame %d B' % rec['frame_bytes'], 'F']])
        if self.sof is not None:
            self.put(self.sof, self.sof, self.out_ann, [ANN_SOF, ['SOF', 'S']])
        if self.rx_error:
            self.put(ss, es, self.out_ann, [ANN_WARN, ['RX_ER asserted during frame', 'RX_ER']])
        self.put(es, es, self.out_python, ['FRAME', rec])
        line = dict(rec, start_sample=ss, end_sample=es,
                    sof_sample=self.sof if self.sof is not None else -1)
        self.put(ss, es, self.out_binary, [0, (json.dumps(line) + '\n').encode()])

    def parse_gmii(self, rec):
        data = self.data
        raw = [b for _, b in data]
        # Preamble 0x55... then SFD 0xD5; the frame proper follows the SFD.
        try:
            sfd = raw.index(0xD5)
        except ValueError:
            self.put(data[0][0], data[-1][0], self.out_ann, [ANN_WARN, ['No SFD in GMII bytes', 'No SFD']])
            return
        for s, b in data:
            self.put(s, s, self.out_ann, [ANN_BYTE, ['%02X' % b]])
        frame = raw[sfd + 1:]
        pos = [s for s, _ in data[sfd + 1:]]
        rec['gmii'] = True
        rec['frame_bytes'] = len(frame)
        if len(frame) < 14:
            return
        be = lambda a, n: int.from_bytes(bytes(frame[a:a + n]), 'big')
        rec['eth_dst'] = be(0, 6)
        rec['eth_src'] = be(6, 6)
        rec['ethertype'] = be(12, 2)
        self.put(pos[0], pos[13], self.out_ann, [ANN_ETH, [
            'Eth %012X -> %012X type 0x%04X' % (rec['eth_src'], rec['eth_dst'], rec['ethertype']), 'Eth']])
        if rec['ethertype'] != 0x0800 or len(frame) < 34:
            return
        ihl = (frame[14] & 0x0F) * 4
        if (frame[14] >> 4) != 4 or ihl < 20 or len(frame) < 14 + ihl:
            return
        rec['ip_proto'] = frame[23]
        rec['ip_src'] = be(26, 4)
        rec['ip_dst'] = be(30, 4)
        dotted = lambda v: '.'.join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0))
        self.put(pos[14], pos[14 + ihl - 1], self.out_ann, [ANN_IP, [
            'IPv4 %s -> %s proto %d' % (dotted(rec['ip_src']), dotted(rec['ip_dst']), rec['ip_proto']), 'IP']])
        u = 14 + ihl
        if rec['ip_proto'] != 17 or len(frame) < u + 8:
            return
        rec['udp_sport'] = be(u, 2)
        rec['udp_dport'] = be(u + 2, 2)
        rec['udp_len'] = be(u + 4, 2)
        self.put(pos[u], pos[u + 7], self.out_ann, [ANN_UDP, [
            'UDP %d -> %d len %d' % (rec['udp_sport'], rec['udp_dport'], rec['udp_len']), 'UDP']])
        p = u + 8
        if len(frame) >= p + 4:
            rec['iperf_seq'] = int.from_bytes(bytes(frame[p:p + 4]), 'big', signed=True)
        if len(frame) >= p + 16:
            rec['udpmon_seq'] = int.from_bytes(bytes(frame[p + 8:p + 16]), 'little', signed=True)
            self.put(pos[p + 8], pos[p + 15], self.out_ann, [ANN_SEQ, [
                'UDPmon frame %d' % rec['udpmon_seq'], '#%d' % rec['udpmon_seq']]])
