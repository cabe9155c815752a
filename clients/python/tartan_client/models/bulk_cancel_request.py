from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.bulk_filter_request import BulkFilterRequest


T = TypeVar("T", bound="BulkCancelRequest")


@_attrs_define
class BulkCancelRequest:
    """`POST /engine/bulk/cancel`.

    Attributes:
        filter_ (BulkFilterRequest): Which flows a bulk job acts on, as a request gives it: every part given
            must match, and at least one must be given.
        compensate (bool | Unset): `false`: kill the flows, no compensation (docs/api.md, "Retry and kill").
        dry_run (bool | Unset): Only count the flows that match; no job is created.
        rate (int | None | Unset): Flows cancelled per second, 1 to 1000 (default 50).
    """

    filter_: BulkFilterRequest
    compensate: bool | Unset = UNSET
    dry_run: bool | Unset = UNSET
    rate: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        filter_ = self.filter_.to_dict()

        compensate = self.compensate

        dry_run = self.dry_run

        rate: int | None | Unset
        if isinstance(self.rate, Unset):
            rate = UNSET
        else:
            rate = self.rate

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "filter": filter_,
            }
        )
        if compensate is not UNSET:
            field_dict["compensate"] = compensate
        if dry_run is not UNSET:
            field_dict["dry_run"] = dry_run
        if rate is not UNSET:
            field_dict["rate"] = rate

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.bulk_filter_request import BulkFilterRequest

        d = dict(src_dict)
        filter_ = BulkFilterRequest.from_dict(d.pop("filter"))

        compensate = d.pop("compensate", UNSET)

        dry_run = d.pop("dry_run", UNSET)

        def _parse_rate(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rate = _parse_rate(d.pop("rate", UNSET))

        bulk_cancel_request = cls(
            filter_=filter_,
            compensate=compensate,
            dry_run=dry_run,
            rate=rate,
        )

        return bulk_cancel_request
