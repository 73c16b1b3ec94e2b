"""``base.values.frozen``: the frozen, slotted value classes that stand in for dataclasses."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from fabrikito.base.values import FrozenInstanceError, field, frozen, replace


@frozen
class Point:
    x: int
    y: int = 0
    tags: Mapping[str, str] = field(default_factory=dict)
    label: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", f"{self.x},{self.y}")

    @property
    def total(self) -> int:
        return self.x + self.y


@frozen
class Empty:
    pass


def test_init_defaults_factory_and_post_init() -> None:
    p = Point(1)
    assert (p.x, p.y, dict(p.tags), p.label, p.total) == (1, 0, {}, "1,0", 1)
    assert Point(1, y=2).label == "1,2" and Point(x=3, y=4, tags={"a": "b"}).tags == {"a": "b"}
    assert Point(1).tags is not Point(1).tags  # a fresh default each time
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, label="x")  # type: ignore[call-arg]


def test_frozen_slotted_equal_hashable_and_readable() -> None:
    p = Point(1, 2)
    with pytest.raises(FrozenInstanceError):
        p.x = 5  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del p.x
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]
    assert not hasattr(p, "__dict__") and getattr(Point, "__slots__", None) == ("x", "y", "tags", "label")
    as_tuple: object = (1, 2, {}, "1,2")
    assert p == Point(1, 2) and p != Point(2, 1) and p != as_tuple
    assert len({Empty(), Empty()}) == 1 and Empty() == Empty()
    assert repr(p) == "Point(x=1, y=2, tags={}, label='1,2')"
    assert Point.__match_args__ == ("x", "y", "tags")
    assert Point.__qualname__ == "Point" and Point.__init__.__qualname__ == "Point.__init__"


def test_replace_keeps_the_rest_and_runs_post_init() -> None:
    p = replace(Point(1, 2, {"k": "v"}), y=5)
    assert (p.x, p.y, dict(p.tags), p.label) == (1, 5, {"k": "v"}, "1,5")
    with pytest.raises(TypeError):
        replace(p, label="no")


def test_hashable_values_hash_by_their_fields() -> None:
    @frozen
    class Pair:
        a: int
        b: str

    assert hash(Pair(1, "x")) == hash(Pair(1, "x")) and {Pair(1, "x"): 1}[Pair(1, "x")] == 1


def test_init_is_written_when_the_first_value_is_made() -> None:
    """Writing ``__init__`` (exec) waits for the class's first value: a class no command makes costs nothing."""

    @frozen
    class Later:
        a: int
        b: str = "b"

    first = Later.__init__
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        Later()  # type: ignore[call-arg]  # a wrong call is refused as before (and writes it)
    written = Later.__init__
    assert written is not first and written.__qualname__.endswith("Later.__init__")
    assert Later(1) == Later(a=1, b="b") and Later.__init__ is written  # written once
    assert Later(2, "c").b == "c"
