##
## This file is part of the pcitrace project.
##
## SPDX-License-Identifier: GPL-3.0-or-later
##

'''
Gigabit / 10 Gigabit Ethernet probe lines -> frames on the wire.

A probe card (as in the papers pcitrace automates) gives the logic analyser, per link
direction, a frame-present line asserted while a frame (preamble included) is on the
fibre, optionally a start-of-frame pulse line, and optionally a GMII-style byte bus
(RXD[7:0], RX_DV, RX_ER on RX_CLK) from which the frame itself can be read: Ethernet,
IPv4 and UDP headers, the UDPmon frame number and the iperf sequence number.

Stack one instance per link direction (option "link" names it).

Binary class "json": one JSON line per frame with the keys of lists.FRAME_FIELDS
(start_ps, end_ps, wire_time_ps, frame_bytes, ...) plus start_sample, end_sample and
sof_sample (-1 without SOF), from which a caller with its own time base can recompute the times.
OUTPUT_PYTHON: ['FRAME', dict] with the same keys, at the end of each frame.
'''

from .pd import Decoder
