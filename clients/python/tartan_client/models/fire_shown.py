from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="FireShown")


@_attrs_define
class FireShown:
    """One fire of a schedule.

    Attributes:
        at (datetime.datetime): The fire time.
        made_at (datetime.datetime): When an engine made it.
        outcome (str): `started`, `skipped`, `buffered`, `missed` or `failed`.
        detail (None | str | Unset): Why it was skipped, missed or failed.
        flow_id (None | str | Unset):
    """

    at: datetime.datetime
    made_at: datetime.datetime
    outcome: str
    detail: None | str | Unset = UNSET
    flow_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        made_at = self.made_at.isoformat()

        outcome = self.outcome

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
                "at": at,
                "made_at": made_at,
                "outcome": outcome,
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
        at = datetime.datetime.fromisoformat(d.pop("at"))

        made_at = datetime.datetime.fromisoformat(d.pop("made_at"))

        outcome = d.pop("outcome")

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

        fire_shown = cls(
            at=at,
            made_at=made_at,
            outcome=outcome,
            detail=detail,
            flow_id=flow_id,
        )

        fire_shown.additional_properties = d
        return fire_shown

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
