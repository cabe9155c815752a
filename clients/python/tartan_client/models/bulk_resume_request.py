from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.bulk_filter_request import BulkFilterRequest


T = TypeVar("T", bound="BulkResumeRequest")


@_attrs_define
class BulkResumeRequest:
    """`POST /engine/bulk/resume`: resume the parked work of the active flows
    a filter matches (docs/retries.md, "Parking").

        Attributes:
            filter_ (BulkFilterRequest): Which flows a bulk job acts on, as a request gives it: every part given
                must match, and at least one must be given.
            dry_run (bool | Unset): Only count the flows that match; no job is created.
            rate (int | None | Unset): Flows resumed per second, 1 to 1000 (default 50).
            reset_attempts (bool | Unset): Resumed items count attempts from 1 again, with a new retry budget
                (default `false`: one more attempt each).
    """

    filter_: BulkFilterRequest
    dry_run: bool | Unset = UNSET
    rate: int | None | Unset = UNSET
    reset_attempts: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        filter_ = self.filter_.to_dict()

        dry_run = self.dry_run

        rate: int | None | Unset
        if isinstance(self.rate, Unset):
            rate = UNSET
        else:
            rate = self.rate

        reset_attempts = self.reset_attempts

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "filter": filter_,
            }
        )
        if dry_run is not UNSET:
            field_dict["dry_run"] = dry_run
        if rate is not UNSET:
            field_dict["rate"] = rate
        if reset_attempts is not UNSET:
            field_dict["reset_attempts"] = reset_attempts

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.bulk_filter_request import BulkFilterRequest

        d = dict(src_dict)
        filter_ = BulkFilterRequest.from_dict(d.pop("filter"))

        dry_run = d.pop("dry_run", UNSET)

        def _parse_rate(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rate = _parse_rate(d.pop("rate", UNSET))

        reset_attempts = d.pop("reset_attempts", UNSET)

        bulk_resume_request = cls(
            filter_=filter_,
            dry_run=dry_run,
            rate=rate,
            reset_attempts=reset_attempts,
        )

        return bulk_resume_request
