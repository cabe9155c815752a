from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.bulk_failure import BulkFailure
    from ..models.bulk_job_view_filter import BulkJobViewFilter


T = TypeVar("T", bound="BulkJobView")


@_attrs_define
class BulkJobView:
    """A bulk job and its progress (docs/api.md, "Bulk operations").

    Attributes:
        created_at (datetime.datetime):
        done (int): Retried or cancelled by the job.
        failed (int): The retry or cancel failed (see `failures`).
        filter_ (BulkJobViewFilter): The filter as given.
        id (str):
        kind (str): `retry` or `cancel`. Example: retry.
        rate (int): Flows acted on per second at most.
        remaining (int): Not acted on yet.
        skipped (int): Left alone: no longer in a status the job acts on, gone, or acted
            on already.
        status (str): `queued`, `running`, `completed`, `cancelled` or `failed`. Example: running.
        total (int): The flows the filter matched when the job was created.
        compensate (bool | None | Unset): A cancel's option (`false`: a kill).
        failures (list[BulkFailure] | Unset): Up to 20 of the flows it failed on (`GET /engine/bulk/{job}` only).
        finished_at (datetime.datetime | None | Unset):
        node (None | str | Unset): The node running it, while one does.
        reset_attempts (bool | None | Unset): A retry's option.
        started_at (datetime.datetime | None | Unset):
    """

    created_at: datetime.datetime
    done: int
    failed: int
    filter_: BulkJobViewFilter
    id: str
    kind: str
    rate: int
    remaining: int
    skipped: int
    status: str
    total: int
    compensate: bool | None | Unset = UNSET
    failures: list[BulkFailure] | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    node: None | str | Unset = UNSET
    reset_attempts: bool | None | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        done = self.done

        failed = self.failed

        filter_ = self.filter_.to_dict()

        id = self.id

        kind = self.kind

        rate = self.rate

        remaining = self.remaining

        skipped = self.skipped

        status = self.status

        total = self.total

        compensate: bool | None | Unset
        if isinstance(self.compensate, Unset):
            compensate = UNSET
        else:
            compensate = self.compensate

        failures: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.failures, Unset):
            failures = []
            for failures_item_data in self.failures:
                failures_item = failures_item_data.to_dict()
                failures.append(failures_item)

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        node: None | str | Unset
        if isinstance(self.node, Unset):
            node = UNSET
        else:
            node = self.node

        reset_attempts: bool | None | Unset
        if isinstance(self.reset_attempts, Unset):
            reset_attempts = UNSET
        else:
            reset_attempts = self.reset_attempts

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "done": done,
                "failed": failed,
                "filter": filter_,
                "id": id,
                "kind": kind,
                "rate": rate,
                "remaining": remaining,
                "skipped": skipped,
                "status": status,
                "total": total,
            }
        )
        if compensate is not UNSET:
            field_dict["compensate"] = compensate
        if failures is not UNSET:
            field_dict["failures"] = failures
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if node is not UNSET:
            field_dict["node"] = node
        if reset_attempts is not UNSET:
            field_dict["reset_attempts"] = reset_attempts
        if started_at is not UNSET:
            field_dict["started_at"] = started_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.bulk_failure import BulkFailure
        from ..models.bulk_job_view_filter import BulkJobViewFilter

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        done = d.pop("done")

        failed = d.pop("failed")

        filter_ = BulkJobViewFilter.from_dict(d.pop("filter"))

        id = d.pop("id")

        kind = d.pop("kind")

        rate = d.pop("rate")

        remaining = d.pop("remaining")

        skipped = d.pop("skipped")

        status = d.pop("status")

        total = d.pop("total")

        def _parse_compensate(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        compensate = _parse_compensate(d.pop("compensate", UNSET))

        _failures = d.pop("failures", UNSET)
        failures: list[BulkFailure] | Unset = UNSET
        if _failures is not UNSET:
            failures = []
            for failures_item_data in _failures:
                failures_item = BulkFailure.from_dict(failures_item_data)

                failures.append(failures_item)

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        def _parse_node(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        node = _parse_node(d.pop("node", UNSET))

        def _parse_reset_attempts(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        reset_attempts = _parse_reset_attempts(d.pop("reset_attempts", UNSET))

        def _parse_started_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        started_at = _parse_started_at(d.pop("started_at", UNSET))

        bulk_job_view = cls(
            created_at=created_at,
            done=done,
            failed=failed,
            filter_=filter_,
            id=id,
            kind=kind,
            rate=rate,
            remaining=remaining,
            skipped=skipped,
            status=status,
            total=total,
            compensate=compensate,
            failures=failures,
            finished_at=finished_at,
            node=node,
            reset_attempts=reset_attempts,
            started_at=started_at,
        )

        bulk_job_view.additional_properties = d
        return bulk_job_view

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
