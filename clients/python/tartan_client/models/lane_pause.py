from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="LanePause")


@_attrs_define
class LanePause:
    """`POST /engine/lanes/{id}/pause`: for how long (absent: until resumed).

    Attributes:
        for_ (None | str | Unset): A duration (`"30s"`, `"PT1M"`, ms); absent: until resumed.
    """

    for_: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        for_: None | str | Unset
        if isinstance(self.for_, Unset):
            for_ = UNSET
        else:
            for_ = self.for_

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if for_ is not UNSET:
            field_dict["for"] = for_

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_for_(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        for_ = _parse_for_(d.pop("for", UNSET))

        lane_pause = cls(
            for_=for_,
        )

        return lane_pause
