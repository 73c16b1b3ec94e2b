"""Text as a reader sees it, for the label rules: the *skeleton* of a text, and whether it holds a label.

A label (``[from owner]``) says who speaks, and the spec forbids one where it
would let a text pass for another sender: in a kickoff, in a role id
(``owner`` and ``launcher`` are fabrikito's own), in a sender.  Comparing bytes
is not enough: ``[\\u200bfrom owner]``, a Cyrillic ``о`` in "from",
``〔from owner〕`` or ``0wner`` read the same as the real thing.  So these rules
compare :func:`skeleton`\\ s, built in this order:

1. NFD, and every format character (Unicode category Cf: zero-width spaces
   and joiners, the word joiner, the soft hyphen, bidi marks), every combining
   mark (Mn: accents, variation selectors) and the Hangul fillers removed;
2. every character folded to its prototype in Unicode's confusables data
   (UTS #39, ``confusables.txt``, as the ``confusable_homoglyphs`` package
   ships it): Cyrillic ``о`` and Greek ``ο`` are ``o``, ``0`` is ``O``, ``1``,
   ``I`` and ``|`` are ``l``, ``m`` is ``rn``, the long ``ſ`` is ``f``; a
   character the data does not list, by its compatibility form (NFKC) folded
   the same way (full-width ``ｆ``, mathematical ``𝐟``); then case folded, and
   folded once more (case folding can make a character that has a prototype);
3. every bracket but ASCII's parentheses and braces read as a square one: an
   opening one (category Ps, or one whose prototype is ``(``) is ``[``, a
   closing one ``]`` (``〔``, ``⁅``, ``【``, ``❲``, ``［``…);
4. every run of white space one space.

The data is loaded only for a text that needs it: ASCII text folds with
:data:`ASCII_FOLDS` (the data's ASCII part, checked against it by a
test), and :func:`label_in` looks at the data only where a bracket is followed by
something that reads as ``f``.  Text
in other scripts is left as it is: a kickoff in Russian or Japanese holds no
label unless it writes one.
"""

from __future__ import annotations

import re
import unicodedata

#: Step 2 for the ASCII characters that fold to more than their lower case (from the data: a test checks).
ASCII_FOLDS = {'"': "''", "%": "º/₀", "0": "o", "1": "l", "I": "l", "M": "rn", "`": "'", "m": "rn", "|": "l"}
_ASCII = str.maketrans({**{chr(c): chr(c).lower() for c in range(ord("A"), ord("Z") + 1)}, **ASCII_FOLDS})
#: Letters that are not Cf or Mn but show nothing (Hangul fillers).
INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0")
#: ASCII brackets kept apart from square ones: a reader does not take ``(from …)`` or ``{from …}`` for a label.
PLAIN = frozenset("(){}")

_loaded: dict[str, dict[str, str]] = {}  # "table": the prototypes, once loaded


class DataMissing(Exception):
    """The confusables data cannot be loaded (the ``confusable_homoglyphs`` package is not installed)."""


def prototypes() -> dict[str, str]:
    """Each character's prototype (one character or a few), from the package's data; loaded once.

    The package lists, for every line ``source → prototype`` of ``confusables.txt``,
    each side under the other.  A prototype is never itself a source there, so a
    character listed with exactly one other is that one's source when the other
    has several (or is a sequence); a pair listed only with each other folds to
    the lower code point, which keeps the same characters together.
    """
    if "table" in _loaded:
        return _loaded["table"]
    try:
        from confusable_homoglyphs.confusables import confusables_data
    except ImportError as exc:
        raise DataMissing(
            "the Unicode confusables data is not installed (the confusable_homoglyphs package): install "
            f"fabrikito with its dependencies ({exc})"
        ) from None
    listed: dict[str, set[str]] = {}
    for key, entries in confusables_data.items():
        name = _visible(key)
        if name:
            found = listed.setdefault(name, set())
            for entry in entries:
                other = _visible(entry["c"])
                if other:
                    found.add(other)
    table: dict[str, str] = {}
    for char, others in listed.items():
        if len(char) != 1 or len(others) != 1:
            continue
        (other,) = others
        if len(other) > 1 or len(listed.get(other, ())) > 1:
            table[char] = other
        elif other != char:
            table[char] = min(char, other)
    _loaded["table"] = table
    return table


def _visible(text: str) -> str:
    """``text`` without its format characters (the data wraps right-to-left letters in marks)."""
    if text.isprintable():  # no Cf (nor any other unprintable) character: the common case, in C
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def _stripped(text: str) -> str:
    """Step 1: NFD, and what shows nothing removed."""
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(c for c in decomposed if unicodedata.category(c) not in ("Cf", "Mn") and c not in INVISIBLE)


def _fold(char: str) -> str:
    """Step 2 for one character of a stripped text (ASCII by the shipped table, the rest by the data)."""
    if char.isascii():
        return char.translate(_ASCII)
    table = prototypes()
    found = table.get(char)
    if found is None:
        compatible = unicodedata.normalize("NFKC", char)
        found = char if compatible == char else "".join(_fold(c) for c in _stripped(compatible))
    return "".join(table.get(c, c) for c in found.casefold())


def _bracket(char: str, folded: str) -> str:
    """Step 4 for one character (``folded``: its step-3 form)."""
    if char in PLAIN:
        return char
    if folded in ("(", "[") or unicodedata.category(char) == "Ps":
        return "["
    if folded in (")", "]") or unicodedata.category(char) == "Pe":
        return "]"
    return folded


def skeleton(text: str) -> str:
    """The form two texts that read alike share (the module docstring's four steps).

    Raises :class:`DataMissing` for a text that needs the confusables data when it cannot be loaded.
    """
    if text.isascii():  # no format character nor mark: one C call (role ids and senders on every command)
        return " ".join(text.translate(_ASCII).split())
    return _folded(_stripped(text))


_LABEL_WORD = "frorn"  # skeleton("from"): m folds to rn
LABEL = re.compile(r"\[\s*" + _LABEL_WORD + r"\b[^\])}]*[\])}]")
#: Every character but ``f`` and ``F`` that folds to ``f`` (checked against the data by a test): a label's
#: word can start only with one of these or ``f``/``F``, so only there is the rest folded.
LOOKS_LIKE_F = frozenset("ſϜՔքᖴᶠẝ₽ℱⒻⓕꓝꞘꞙꟳꬵＦｆ𐊇𐊥𐔥𑢢𑣂𝈓𝐅𝐟𝐹𝑓𝑭𝒇𝒻𝓕𝓯𝔉𝔣𝔽𝕗𝕱𝖋𝖥𝖿𝗙𝗳𝘍𝘧𝙁𝙛𝙵𝚏𝟊🄵")
#: Opening look-alikes of ``(`` or ``[`` that are not in category Ps (checked by the same test).
OPENS_TOO = frozenset("﴾")


def label_in(text: str) -> str | None:
    """The label ``text`` holds, as it is written there (look-alikes and all, invisible characters left out),
    or ``None``.

    A label is an opening bracket, the word "from" and a closing bracket, in any
    of the look-alike forms above.  Only where an opening bracket is followed by
    something that can read as ``f`` is the text folded, so the data is loaded
    for a text that comes close to a label, never for ordinary text.

    Raises :class:`DataMissing` when such a text needs the data and it cannot be loaded.
    """
    if not any(_opens(c) for c in set(text)):  # each distinct character once: most texts stop here
        return None
    stripped = text if text.isascii() else _stripped(text)
    for i, char in enumerate(stripped):
        if not _opens(char):
            continue
        j = i + 1
        while j < len(stripped) and stripped[j].isspace():
            j += 1
        if j == len(stripped) or not (stripped[j] in "fF" or stripped[j] in LOOKS_LIKE_F):
            continue
        folded, origins = [], []
        for k, c in enumerate(stripped[i:], start=i):
            piece = _bracket(c, _fold(c))
            folded.append(piece)
            origins += [k] * len(piece)
        found = LABEL.match("".join(folded))
        if found is not None:
            return stripped[i : origins[found.end() - 1] + 1]
    return None


def _opens(char: str) -> bool:
    """Whether ``char`` reads as an opening square bracket (step 3)."""
    return char == "[" or char in OPENS_TOO or (char not in PLAIN and unicodedata.category(char) == "Ps")


def _folded(stripped: str) -> str:
    """Steps 2 to 4 for text already through step 1."""
    return " ".join("".join(_bracket(c, _fold(c)) for c in stripped).split())


def same(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` read the same (equal skeletons)."""
    return skeleton(a) == skeleton(b)
