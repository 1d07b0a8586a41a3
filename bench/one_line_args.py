"""Bad arguments as one line and exit 2, for the bench's PyTorch scripts (argparse's own error is
a usage block). Imports nothing heavy, so a script may use it before it loads torch."""
import argparse
import sys


def fail(tool, message):
    print(f'{tool}: {message}', file=sys.stderr)
    sys.exit(2)


def parser(tool, **kwargs):
    """An ArgumentParser whose errors are fail(tool, message)."""
    class Parser(argparse.ArgumentParser):
        def error(self, message):
            fail(tool, message)
    return Parser(**kwargs)
