from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.schedule_flow import ScheduleFlow


T = TypeVar("T", bound="ScheduleRequest")


@_attrs_define
class ScheduleRequest:
    """A schedule: when it fires (one of `cron`, `every`, `at`), what it
    starts, and what it does about overlaps and missed times.

        Attributes:
            id (str): The schedule's id, sanitised as a flow's; required. Example: nightly-report.
            at (datetime.datetime | None | Unset): One time (RFC 3339), in the future.
            catchup (None | str | Unset): `latest` (default), `none` or `all`.
            cron (None | str | Unset): Five fields (minute hour day-of-month month day-of-week), six with
                seconds first, or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`. Example: 0 3 * * *.
            end_at (datetime.datetime | None | Unset): No fire after this time (RFC 3339).
            every (None | str | Unset): A period, at least 1 s, in any duration form. Example: 15m.
            flow (ScheduleFlow | Unset): The flow a schedule starts: a start request without an id.
            jitter (None | str | Unset): Each fire is made up to this much after its time (the same for
                every engine); at most 1 h, and less than `every`. Example: 30s.
            overlap (None | str | Unset): `skip` (default), `allow`, `cancel_previous` or `buffer_one`.
            paused (bool | Unset): Created paused: nothing fires until it is resumed.
            timezone (None | str | Unset): The IANA time zone `cron` is read in; UTC when absent. Example: Europe/Berlin.
    """

    id: str
    at: datetime.datetime | None | Unset = UNSET
    catchup: None | str | Unset = UNSET
    cron: None | str | Unset = UNSET
    end_at: datetime.datetime | None | Unset = UNSET
    every: None | str | Unset = UNSET
    flow: ScheduleFlow | Unset = UNSET
    jitter: None | str | Unset = UNSET
    overlap: None | str | Unset = UNSET
    paused: bool | Unset = UNSET
    timezone: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        at: None | str | Unset
        if isinstance(self.at, Unset):
            at = UNSET
        elif isinstance(self.at, datetime.datetime):
            at = self.at.isoformat()
        else:
            at = self.at

        catchup: None | str | Unset
        if isinstance(self.catchup, Unset):
            catchup = UNSET
        else:
            catchup = self.catchup

        cron: None | str | Unset
        if isinstance(self.cron, Unset):
            cron = UNSET
        else:
            cron = self.cron

        end_at: None | str | Unset
        if isinstance(self.end_at, Unset):
            end_at = UNSET
        elif isinstance(self.end_at, datetime.datetime):
            end_at = self.end_at.isoformat()
        else:
            end_at = self.end_at

        every: None | str | Unset
        if isinstance(self.every, Unset):
            every = UNSET
        else:
            every = self.every

        flow: dict[str, Any] | Unset = UNSET
        if not isinstance(self.flow, Unset):
            flow = self.flow.to_dict()

        jitter: None | str | Unset
        if isinstance(self.jitter, Unset):
            jitter = UNSET
        else:
            jitter = self.jitter

        overlap: None | str | Unset
        if isinstance(self.overlap, Unset):
            overlap = UNSET
        else:
            overlap = self.overlap

        paused = self.paused

        timezone: None | str | Unset
        if isinstance(self.timezone, Unset):
            timezone = UNSET
        else:
            timezone = self.timezone

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
            }
        )
        if at is not UNSET:
            field_dict["at"] = at
        if catchup is not UNSET:
            field_dict["catchup"] = catchup
        if cron is not UNSET:
            field_dict["cron"] = cron
        if end_at is not UNSET:
            field_dict["end_at"] = end_at
        if every is not UNSET:
            field_dict["every"] = every
        if flow is not UNSET:
            field_dict["flow"] = flow
        if jitter is not UNSET:
            field_dict["jitter"] = jitter
        if overlap is not UNSET:
            field_dict["overlap"] = overlap
        if paused is not UNSET:
            field_dict["paused"] = paused
        if timezone is not UNSET:
            field_dict["timezone"] = timezone

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.schedule_flow import ScheduleFlow

        d = dict(src_dict)
        id = d.pop("id")

        def _parse_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                at_type_0 = datetime.datetime.fromisoformat(data)

                return at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        at = _parse_at(d.pop("at", UNSET))

        def _parse_catchup(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        catchup = _parse_catchup(d.pop("catchup", UNSET))

        def _parse_cron(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cron = _parse_cron(d.pop("cron", UNSET))

        def _parse_end_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                end_at_type_0 = datetime.datetime.fromisoformat(data)

                return end_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        end_at = _parse_end_at(d.pop("end_at", UNSET))

        def _parse_every(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        every = _parse_every(d.pop("every", UNSET))

        _flow = d.pop("flow", UNSET)
        flow: ScheduleFlow | Unset
        if isinstance(_flow, Unset):
            flow = UNSET
        else:
            flow = ScheduleFlow.from_dict(_flow)

        def _parse_jitter(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        jitter = _parse_jitter(d.pop("jitter", UNSET))

        def _parse_overlap(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        overlap = _parse_overlap(d.pop("overlap", UNSET))

        paused = d.pop("paused", UNSET)

        def _parse_timezone(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        timezone = _parse_timezone(d.pop("timezone", UNSET))

        schedule_request = cls(
            id=id,
            at=at,
            catchup=catchup,
            cron=cron,
            end_at=end_at,
            every=every,
            flow=flow,
            jitter=jitter,
            overlap=overlap,
            paused=paused,
            timezone=timezone,
        )

        schedule_request.additional_properties = d
        return schedule_request

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
