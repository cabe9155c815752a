from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.flow_status import FlowStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.bulk_filter_request_labels import BulkFilterRequestLabels


T = TypeVar("T", bound="BulkFilterRequest")


@_attrs_define
class BulkFilterRequest:
    """Which flows a bulk job acts on, as a request gives it: every part given
    must match, and at least one must be given.

        Attributes:
            created_after (datetime.datetime | None | Unset): Flows created at or after this (RFC 3339).
            created_before (datetime.datetime | None | Unset): Flows created before this (RFC 3339).
            error_class (None | str | Unset): Flows with a failed work item whose last attempt ended so:
                `retryable`, `permanent`, `timeout`, `cancelled` or `abandoned`.
            failed_step (None | str | Unset): Flows with a failed work item of this step.
            id_prefix (None | str | Unset): Flows whose id starts with this.
            ids (list[str] | Unset): These flows (at most 1000).
            labels (BulkFilterRequestLabels | Unset): Flows carrying every one of these labels (at most 32; keys and
                values at most 256 bytes).
            statuses (list[FlowStatus] | Unset): Flows in any of these statuses: `failed` or `cancelled` for a retry,
                `active` for a cancel (the default: all of those).
    """

    created_after: datetime.datetime | None | Unset = UNSET
    created_before: datetime.datetime | None | Unset = UNSET
    error_class: None | str | Unset = UNSET
    failed_step: None | str | Unset = UNSET
    id_prefix: None | str | Unset = UNSET
    ids: list[str] | Unset = UNSET
    labels: BulkFilterRequestLabels | Unset = UNSET
    statuses: list[FlowStatus] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
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

        id_prefix: None | str | Unset
        if isinstance(self.id_prefix, Unset):
            id_prefix = UNSET
        else:
            id_prefix = self.id_prefix

        ids: list[str] | Unset = UNSET
        if not isinstance(self.ids, Unset):
            ids = self.ids

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        statuses: list[str] | Unset = UNSET
        if not isinstance(self.statuses, Unset):
            statuses = []
            for statuses_item_data in self.statuses:
                statuses_item = statuses_item_data.value
                statuses.append(statuses_item)

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if created_after is not UNSET:
            field_dict["created_after"] = created_after
        if created_before is not UNSET:
            field_dict["created_before"] = created_before
        if error_class is not UNSET:
            field_dict["error_class"] = error_class
        if failed_step is not UNSET:
            field_dict["failed_step"] = failed_step
        if id_prefix is not UNSET:
            field_dict["id_prefix"] = id_prefix
        if ids is not UNSET:
            field_dict["ids"] = ids
        if labels is not UNSET:
            field_dict["labels"] = labels
        if statuses is not UNSET:
            field_dict["statuses"] = statuses

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.bulk_filter_request_labels import BulkFilterRequestLabels

        d = dict(src_dict)

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

        def _parse_id_prefix(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        id_prefix = _parse_id_prefix(d.pop("id_prefix", UNSET))

        ids = cast(list[str], d.pop("ids", UNSET))

        _labels = d.pop("labels", UNSET)
        labels: BulkFilterRequestLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = BulkFilterRequestLabels.from_dict(_labels)

        _statuses = d.pop("statuses", UNSET)
        statuses: list[FlowStatus] | Unset = UNSET
        if _statuses is not UNSET:
            statuses = []
            for statuses_item_data in _statuses:
                statuses_item = FlowStatus(statuses_item_data)

                statuses.append(statuses_item)

        bulk_filter_request = cls(
            created_after=created_after,
            created_before=created_before,
            error_class=error_class,
            failed_step=failed_step,
            id_prefix=id_prefix,
            ids=ids,
            labels=labels,
            statuses=statuses,
        )

        return bulk_filter_request
