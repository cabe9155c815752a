from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TriggerAnswer")


@_attrs_define
class TriggerAnswer:
    """`POST /engine/schedule/{id}/trigger`: what the fire came to.

    Attributes:
        outcome (str): `started`, `skipped`, `buffered` or `failed`.
        schedule_id (str):
        detail (None | str | Unset):
        flow_id (None | str | Unset):
    """

    outcome: str
    schedule_id: str
    detail: None | str | Unset = UNSET
    flow_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        outcome = self.outcome

        schedule_id = self.schedule_id

        detail: None | str | Unset
        if isinstance(self.detail, Unset):
            detail = UNSET
        else:
            detail = self.detail

        flow_id: None | str | Unset
        if isinstance(self.flow_id, Unset):
            flow_id = UNSET
        else:
            flow_id = self.flow_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "outcome": outcome,
                "schedule_id": schedule_id,
            }
        )
        if detail is not UNSET:
            field_dict["detail"] = detail
        if flow_id is not UNSET:
            field_dict["flow_id"] = flow_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        outcome = d.pop("outcome")

        schedule_id = d.pop("schedule_id")

        def _parse_detail(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        detail = _parse_detail(d.pop("detail", UNSET))

        def _parse_flow_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        flow_id = _parse_flow_id(d.pop("flow_id", UNSET))

        trigger_answer = cls(
            outcome=outcome,
            schedule_id=schedule_id,
            detail=detail,
            flow_id=flow_id,
        )

        trigger_answer.additional_properties = d
        return trigger_answer

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
