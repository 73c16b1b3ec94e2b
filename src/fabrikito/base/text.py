"""What text fabrikito carries to a seat: valid UTF-8, with no control character but tab and newline.

``say`` types a message into a terminal, where an escape sequence, a BEL or
another C0/C1 control is acted on instead of shown, so the box could never be
confirmed to hold the message and the text would be left in it, half-typed.
``send`` puts it in a session's inbox, from where the seat's screen shows it.
Both refuse such a message before anything is typed or sent, with the reason
this module gives.
"""

from __future__ import annotations


def refusal_for(text: str) -> str | None:
    """Why ``text`` is not carried to a seat, or ``None`` when it can be."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8, kept by Python as surrogates
        return (
            "the message is not valid UTF-8 text (the log shows its bytes as \\xHH): convert it, for example "
            "with iconv -f latin1 -t utf-8, and send again"
        )
    for char in text:
        code = ord(char)
        if (code < 0x20 and char not in "\t\n") or 0x7F <= code <= 0x9F:
            return (
                f"the message holds the control character U+{code:04X}, which a terminal acts on instead of "
                "showing: remove it (tab and newline are the only ones carried) and send again"
            )
    return None
