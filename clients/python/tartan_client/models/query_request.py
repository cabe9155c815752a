from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.flow_status import FlowStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.query_request_labels import QueryRequestLabels


T = TypeVar("T", bound="QueryRequest")


@_attrs_define
class QueryRequest:
    """`POST /engine/flow/query`: every criterion is optional.

    Attributes:
        children (bool | Unset): Include the child flows of flow steps (hidden unless `true`).
        created_after (datetime.datetime | None | Unset): Flows created at or after this (RFC 3339).
        created_before (datetime.datetime | None | Unset): Flows created before this (RFC 3339).
        cursor (str | Unset): The `next_cursor` of the previous page.
        error_class (None | str | Unset): Flows with a failed work item whose last attempt ended so:
            `retryable`, `permanent`, `timeout`, `cancelled` or `abandoned`.
        failed_step (None | str | Unset): Flows with a failed work item of this step.
        id_prefix (str | Unset): Flows whose id starts with this.
        labels (QueryRequestLabels | Unset): Flows carrying every one of these labels (at most 32; keys and
            values at most 256 bytes).
        limit (int | Unset): Flows per page, 0 to 1000 (0: 100).
        sort (str | Unset): `recent_asc` (the default, as in Argyll) or `recent_desc`: the
            order within each group, running flows before ended ones. Example: recent_desc.
        statuses (list[FlowStatus] | Unset): Flows in any of these statuses.
        total (bool | None | Unset): `false` leaves `total` out of the answer: counting reads every
            flow that matches, about 50 ms per 200,000 on Postgres (docs/api.md,
            "Listing flows"). Counted unless `false`, as Argyll counts.
    """

    children: bool | Unset = UNSET
    created_after: datetime.datetime | None | Unset = UNSET
    created_before: datetime.datetime | None | Unset = UNSET
    cursor: str | Unset = UNSET
    error_class: None | str | Unset = UNSET
    failed_step: None | str | Unset = UNSET
    id_prefix: str | Unset = UNSET
    labels: QueryRequestLabels | Unset = UNSET
    limit: int | Unset = UNSET
    sort: str | Unset = UNSET
    statuses: list[FlowStatus] | Unset = UNSET
    total: bool | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        children = self.children

        created_after: None | str | Unset
        if isinstance(self.created_after, Unset):
            created_after = UNSET
        elif isinstance(self.created_after, datetime.datetime):
            created_after = self.created_after.isoformat()
        else:
            created_after = self.created_after

        created_before: None | str | Unset
        if isinstance(self.created_before, Unset):
            created_before = UNSET
        elif isinstance(self.created_before, datetime.datetime):
            created_before = self.created_before.isoformat()
        else:
            created_before = self.created_before

        cursor = self.cursor

        error_class: None | str | Unset
        if isinstance(self.error_class, Unset):
            error_class = UNSET
        else:
            error_class = self.error_class

        failed_step: None | str | Unset
        if isinstance(self.failed_step, Unset):
            failed_step = UNSET
        else:
            failed_step = self.failed_step

        id_prefix = self.id_prefix

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        limit = self.limit

        sort = self.sort

        statuses: list[str] | Unset = UNSET
        if not isinstance(self.statuses, Unset):
            statuses = []
            for statuses_item_data in self.statuses:
                statuses_item = statuses_item_data.value
                statuses.append(statuses_item)

        total: bool | None | Unset
        if isinstance(self.total, Unset):
            total = UNSET
        else:
            total = self.total

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if children is not UNSET:
            field_dict["children"] = children
        if created_after is not UNSET:
            field_dict["created_after"] = created_after
        if created_before is not UNSET:
            field_dict["created_before"] = created_before
        if cursor is not UNSET:
            field_dict["cursor"] = cursor
        if error_class is not UNSET:
            field_dict["error_class"] = error_class
        if failed_step is not UNSET:
            field_dict["failed_step"] = failed_step
        if id_prefix is not UNSET:
            field_dict["id_prefix"] = id_prefix
        if labels is not UNSET:
            field_dict["labels"] = labels
        if limit is not UNSET:
            field_dict["limit"] = limit
        if sort is not UNSET:
            field_dict["sort"] = sort
        if statuses is not UNSET:
            field_dict["statuses"] = statuses
        if total is not UNSET:
            field_dict["total"] = total

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.query_request_labels import QueryRequestLabels

        d = dict(src_dict)
        children = d.pop("children", UNSET)

        def _parse_created_after(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                created_after_type_0 = datetime.datetime.fromisoformat(data)

                return created_after_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        created_after = _parse_created_after(d.pop("created_after", UNSET))

        def _parse_created_before(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                created_before_type_0 = datetime.datetime.fromisoformat(data)

                return created_before_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        created_before = _parse_created_before(d.pop("created_before", UNSET))

        cursor = d.pop("cursor", UNSET)

        def _parse_error_class(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error_class = _parse_error_class(d.pop("error_class", UNSET))

        def _parse_failed_step(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        failed_step = _parse_failed_step(d.pop("failed_step", UNSET))

        id_prefix = d.pop("id_prefix", UNSET)

        _labels = d.pop("labels", UNSET)
        labels: QueryRequestLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = QueryRequestLabels.from_dict(_labels)

        limit = d.pop("limit", UNSET)

        sort = d.pop("sort", UNSET)

        _statuses = d.pop("statuses", UNSET)
        statuses: list[FlowStatus] | Unset = UNSET
        if _statuses is not UNSET:
            statuses = []
            for statuses_item_data in _statuses:
                statuses_item = FlowStatus(statuses_item_data)

                statuses.append(statuses_item)

        def _parse_total(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        total = _parse_total(d.pop("total", UNSET))

        query_request = cls(
            children=children,
            created_after=created_after,
            created_before=created_before,
            cursor=cursor,
            error_class=error_class,
            failed_step=failed_step,
            id_prefix=id_prefix,
            labels=labels,
            limit=limit,
            sort=sort,
            statuses=statuses,
            total=total,
        )

        query_request.additional_properties = d
        return query_request

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
