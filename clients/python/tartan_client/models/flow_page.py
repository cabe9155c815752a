from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.flow_summary import FlowSummary


T = TypeVar("T", bound="FlowPage")


@_attrs_define
class FlowPage:
    """A page of a flow query.

    Attributes:
        count (int):
        flows (list[FlowSummary]):
        has_more (bool | Unset):
        next_cursor (None | str | Unset): The `cursor` of the next page, when there is more.
        total (int | None | Unset): The flows that match, over all pages; absent when the query said
            `"total": false`.
    """

    count: int
    flows: list[FlowSummary]
    has_more: bool | Unset = UNSET
    next_cursor: None | str | Unset = UNSET
    total: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        count = self.count

        flows = []
        for flows_item_data in self.flows:
            flows_item = flows_item_data.to_dict()
            flows.append(flows_item)

        has_more = self.has_more

        next_cursor: None | str | Unset
        if isinstance(self.next_cursor, Unset):
            next_cursor = UNSET
        else:
            next_cursor = self.next_cursor

        total: int | None | Unset
        if isinstance(self.total, Unset):
            total = UNSET
        else:
            total = self.total

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "count": count,
                "flows": flows,
            }
        )
        if has_more is not UNSET:
            field_dict["has_more"] = has_more
        if next_cursor is not UNSET:
            field_dict["next_cursor"] = next_cursor
        if total is not UNSET:
            field_dict["total"] = total

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.flow_summary import FlowSummary

        d = dict(src_dict)
        count = d.pop("count")

        flows = []
        _flows = d.pop("flows")
        for flows_item_data in _flows:
            flows_item = FlowSummary.from_dict(flows_item_data)

            flows.append(flows_item)

        has_more = d.pop("has_more", UNSET)

        def _parse_next_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))

        def _parse_total(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        total = _parse_total(d.pop("total", UNSET))

        flow_page = cls(
            count=count,
            flows=flows,
            has_more=has_more,
            next_cursor=next_cursor,
            total=total,
        )

        flow_page.additional_properties = d
        return flow_page

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
