from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="DelayParts")


@_attrs_define
class DelayParts:
    """The delay before retry `r + 1` and how it was made, for explainability.

    Attributes:
        cap_applied (bool): Whether the cap lowered the value.
        capped_ms (int): `min(computed_ms, max_backoff)`.
        computed_ms (int): The backoff formula's value, before the cap.
        delay_ms (int): The wait to schedule.
        jitter_ms (int): The change made by jitter: ≤ 0 for full/equal, ≥ 0 for Serverless
            Workflow's extra jitter.
        retry_after_applied (bool): Whether `Retry-After` raised the delay.
        retry_after_ms (int | None | Unset): The response's `Retry-After`, as given.
    """

    cap_applied: bool
    capped_ms: int
    computed_ms: int
    delay_ms: int
    jitter_ms: int
    retry_after_applied: bool
    retry_after_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cap_applied = self.cap_applied

        capped_ms = self.capped_ms

        computed_ms = self.computed_ms

        delay_ms = self.delay_ms

        jitter_ms = self.jitter_ms

        retry_after_applied = self.retry_after_applied

        retry_after_ms: int | None | Unset
        if isinstance(self.retry_after_ms, Unset):
            retry_after_ms = UNSET
        else:
            retry_after_ms = self.retry_after_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cap_applied": cap_applied,
                "capped_ms": capped_ms,
                "computed_ms": computed_ms,
                "delay_ms": delay_ms,
                "jitter_ms": jitter_ms,
                "retry_after_applied": retry_after_applied,
            }
        )
        if retry_after_ms is not UNSET:
            field_dict["retry_after_ms"] = retry_after_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        cap_applied = d.pop("cap_applied")

        capped_ms = d.pop("capped_ms")

        computed_ms = d.pop("computed_ms")

        delay_ms = d.pop("delay_ms")

        jitter_ms = d.pop("jitter_ms")

        retry_after_applied = d.pop("retry_after_applied")

        def _parse_retry_after_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        retry_after_ms = _parse_retry_after_ms(d.pop("retry_after_ms", UNSET))

        delay_parts = cls(
            cap_applied=cap_applied,
            capped_ms=capped_ms,
            computed_ms=computed_ms,
            delay_ms=delay_ms,
            jitter_ms=jitter_ms,
            retry_after_applied=retry_after_applied,
            retry_after_ms=retry_after_ms,
        )

        delay_parts.additional_properties = d
        return delay_parts

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
