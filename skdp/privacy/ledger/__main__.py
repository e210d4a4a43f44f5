"""``python -m skdp.privacy.ledger``: show or create a privacy ledger."""

import argparse
import sys

from ._file import LedgerError
from ._ledger import PrivacyLedger, composed_epsilon


def show(path, out=None):
    """Print the ledger at ``path``: one line per entry and the composed total."""
    out = sys.stdout if out is None else out
    ledger = PrivacyLedger(path)
    entries = ledger.entries
    print(f"privacy ledger {ledger.name!r} ({ledger.path})", file=out)
    print(f"cap: epsilon {ledger.max_epsilon:g} at delta {ledger.delta:g}, about one "
          f"{ledger.privacy_unit}", file=out)
    rows = [("when (UTC)", "what", "epsilon", "delta", "unit", "status")]
    rows += [(e.time, e.what, f"{e.epsilon:.4g}", f"{e.delta:.3g}", e.privacy_unit, e.status)
             for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip(), file=out)
    total = composed_epsilon(entries, ledger.delta)
    print(f"{len(entries)} entries; composed: epsilon {total:.4g} at delta {ledger.delta:g}; "
          f"remaining {max(0.0, ledger.max_epsilon - total):.4g}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m skdp.privacy.ledger",
                                     description="Show or create a skdp privacy ledger.")
    commands = parser.add_subparsers(dest="command", required=True)
    show_cmd = commands.add_parser("show", help="list the entries and the composed total")
    show_cmd.add_argument("file")
    create_cmd = commands.add_parser("create", help="start the ledger of a data set")
    create_cmd.add_argument("file")
    create_cmd.add_argument("--max-epsilon", type=float, required=True)
    create_cmd.add_argument("--delta", type=float, required=True)
    create_cmd.add_argument("--privacy-unit", choices=("record", "unit"), default="record")
    create_cmd.add_argument("--name")
    args = parser.parse_args(argv)
    try:
        if args.command == "create":
            PrivacyLedger.create(args.file, max_epsilon=args.max_epsilon, delta=args.delta,
                                 privacy_unit=args.privacy_unit, name=args.name)
        show(args.file)
    except (LedgerError, FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
