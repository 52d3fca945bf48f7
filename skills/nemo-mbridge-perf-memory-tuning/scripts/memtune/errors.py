"""The one exception type the CLI turns into a one-line error and exit code 2."""


class UserError(Exception):
    """Bad input from the user: the message names the file, key or line at fault."""
