/*
 * `nicsim capture`: the frames of a run directory's fabric, with their
 * fault marks, to a pcap file (libpcap), a pcapng file (fab_capture.h's
 * writer), a pipe into Wireshark or tshark, or one line of text per frame.
 * docs/capture.md is the user's guide.
 *
 * It has options of its own, so cli_main() hands the whole command line
 * over when the command is `capture` (or `help capture`) before parsing it.
 * Exit status as cli.h: 0 (also when stopped by SIGINT, SIGTERM, --count,
 * or a reader that went away), 1 a runtime failure (no fabric, another
 * capture attached, a write error), 2 a usage error.
 */
#ifndef NICSIM_CAPTURE_H
#define NICSIM_CAPTURE_H

#include <stdbool.h>

/* Whether the command line's command is `capture` or `help capture`. */
bool cli_capture_cmd(int argc, char **argv);

/* Run `nicsim capture`; returns the exit status. */
int cli_capture(int argc, char **argv);

#endif /* NICSIM_CAPTURE_H */
