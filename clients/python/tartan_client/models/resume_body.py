from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ResumeBody")


@_attrs_define
class ResumeBody:
    """A resume's optional body (docs/retries.md, "Parking").

    Attributes:
        reset_attempts (bool | Unset): Resumed items count attempts from 1 again, with a new retry budget;
            `false` (the default): one more attempt each.
    """

    reset_attempts: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        reset_attempts = self.reset_attempts

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if reset_attempts is not UNSET:
            field_dict["reset_attempts"] = reset_attempts

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        reset_attempts = d.pop("reset_attempts", UNSET)

        resume_body = cls(
            reset_attempts=reset_attempts,
        )

        return resume_body
