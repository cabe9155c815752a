#!/usr/bin/env python3
"""The README's walk-through with the generated Python client (tartan_client).

Registers the greeter's steps (examples/steps/greet.json and shout.json),
starts a flow like examples/flows/hello.json under a fresh id, waits for it
with `status?wait=30s`, reads its state and prints the `shout` it produced,
"HELLO, ADA!"; exits non-zero, saying why, when anything differs.

    python3 clients/python/walkthrough.py [--server URL] [--greeter HOST:PORT]

The server defaults to $TARTAN_SERVER or http://127.0.0.1:8080 ($TARTAN_TOKEN
when it has tokens); the greeter (`cargo run --example greeter`) to
$GREETER_ADDR or 127.0.0.1:8081, the address the step files name: the steps
are registered with their endpoints pointed there. Needs the packages of
clients/python/requirements.txt (httpx and attrs) and Python
3.11 or later.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# tartan_client is generated beside this file (clients/regen).
sys.path.insert(0, str(HERE))

from tartan_client import AuthenticatedClient, Client  # noqa: E402
from tartan_client.api.flows import get_flow, get_flow_status, start_flow  # noqa: E402
from tartan_client.api.steps import register_step  # noqa: E402
from tartan_client.models import (  # noqa: E402
    FlowAnswer,
    FlowState,
    FlowStatus,
    FlowStatusAnswer,
    StartFlow,
    Step,
    StepSaved,
)
from tartan_client.types import Response  # noqa: E402

# Where the example step files send their calls.
EXAMPLE_GREETER = "127.0.0.1:8081"


def answer(response: Response, wanted: type, what: str):
    """The parsed answer when it is the one wanted, else exit with the problem."""
    if isinstance(response.parsed, wanted):
        return response.parsed
    detail = getattr(response.parsed, "detail", None) or response.content.decode(errors="replace")
    sys.exit(f"{what}: {int(response.status_code)} {detail}")


def step_from(path: Path, greeter: str) -> Step:
    """A step file, its endpoint pointed at the greeter."""
    data = json.loads(path.read_text(encoding="utf-8"))
    http = data.get("http") or {}
    http["endpoint"] = http["endpoint"].replace(EXAMPLE_GREETER, greeter, 1)
    return Step.from_dict(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=os.environ.get("TARTAN_SERVER", "http://127.0.0.1:8080"))
    parser.add_argument("--greeter", default=os.environ.get("GREETER_ADDR", EXAMPLE_GREETER))
    args = parser.parse_args()

    # The status wait below holds its request for up to 30 s.
    timeout = httpx.Timeout(45.0)
    token = os.environ.get("TARTAN_TOKEN")
    client: Client | AuthenticatedClient
    if token:
        client = AuthenticatedClient(base_url=args.server, token=token, timeout=timeout)
    else:
        client = Client(base_url=args.server, timeout=timeout)

    with client as client:
        for name in ("greet.json", "shout.json"):
            step = step_from(ROOT / "examples" / "steps" / name, args.greeter)
            saved = answer(
                register_step.sync_detailed(client=client, body=step), StepSaved, f"register {step.id}"
            )
            print(f"registered {saved.step.id}: {saved.message}")

        hello = json.loads((ROOT / "examples" / "flows" / "hello.json").read_text(encoding="utf-8"))
        hello["id"] = f"hello-{uuid.uuid4()}"
        started = answer(
            start_flow.sync_detailed(client=client, body=StartFlow.from_dict(hello)),
            FlowAnswer,
            f"start {hello['id']}",
        )
        flow_id = started.flow_id
        print(f"started {flow_id}")

        status = answer(
            get_flow_status.sync_detailed(flow_id, client=client, wait="30s"),
            FlowStatusAnswer,
            f"wait for {flow_id}",
        )
        if status.status != FlowStatus.COMPLETED:
            sys.exit(f"flow {flow_id} is {status.status.value}, not completed")

        state = answer(get_flow.sync_detailed(flow_id, client=client), FlowState, f"get {flow_id}")
        shouts = state.attributes.additional_properties.get("shout") or []
        value = shouts[0].value if shouts else None
        print(json.dumps(value))
        if value != "HELLO, ADA!":
            sys.exit(f'shout is {value!r}, not "HELLO, ADA!"')


if __name__ == "__main__":
    main()
