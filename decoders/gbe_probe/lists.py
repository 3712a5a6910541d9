##
## This file is part of the pcitrace project (libsigrokdecode protocol decoder "gbe_probe").
##
## SPDX-License-Identifier: GPL-3.0-or-later
##
# Facts shared by the sigrok decoder and pcitrace's fast probe engine (which loads this
# file by path). Keep it free of imports.

# Bytes on the wire besides the Ethernet frame itself: preamble + SFD. The frame-present
# line covers preamble and frame, not the inter-frame gap.
PREAMBLE_BYTES = 8
IFG_BYTES = 12
ETH_HEADER_BYTES = 14
ETH_CRC_BYTES = 4

LINK_RATES = {'1G': 1000000000, '10G': 10000000000}

# Frame record fields, in order, with a type letter as in decoders/pci/lists.py.
FRAME_FIELDS = (
    ('link', 's'),
    ('start_ps', 'i'),        # frame-present asserted (first sample)
    ('end_ps', 'i'),          # frame-present deasserted (first sample after the frame)
    ('wire_time_ps', 'i'),    # end_ps - start_ps
    ('frame_bytes', 'i'),     # Ethernet frame (header..CRC): from GMII bytes, else estimated from wire time
    ('sof_ps', 'i'),          # start-of-frame pulse inside the frame, -1 when none
    ('gmii', 'b'),            # frame read from the GMII byte bus
    ('rx_error', 'b'),        # RX_ER seen during the frame
    ('eth_dst', 'u'),
    ('eth_src', 'u'),
    ('ethertype', 'i'),       # -1 without GMII
    ('ip_src', 'i'),
    ('ip_dst', 'i'),
    ('ip_proto', 'i'),
    ('udp_sport', 'i'),
    ('udp_dport', 'i'),
    ('udp_len', 'i'),
    ('udpmon_seq', 'i'),      # int64 little-endian at UDP payload offset 8, -1 when not read
    ('iperf_seq', 'i'),       # iperf2 datagram id: int32 big-endian at UDP payload offset 0, -1
    ('truncated', 'b'),       # capture ended while the frame was on the wire
)
