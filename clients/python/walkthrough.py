#!/usr/bin/env python3
"""The README's walk-through with the Python client, tartan_client, as installed.

Registers two steps on the greeter (`cargo run --example greeter`), its
`/greet` and `/shout` as the README's `greet` and `shout` call them but under
ids of their own, `client-greet-py` and `client-shout-py`, starts a flow
towards `client-shout-py` with `name: Ada`, waits for it with
`status?wait=30s`, reads its state and prints the shout it produced,
"HELLO, ADA!"; exits non-zero, saying why, when anything differs.

    python walkthrough.py [--server URL] [--greeter HOST:PORT]

The server defaults to $TARTAN_SERVER or http://127.0.0.1:8080 ($TARTAN_TOKEN
when it has tokens), the greeter to $GREETER_ADDR or 127.0.0.1:8081.

Its steps and attributes are its own (the outputs `greeting_py` and
`shout_py`, mapped to the greeter's `greeting` and `shout`), so that it
neither meets the README's tour, which changes `greet`, nor the TypeScript
walk-through; a step of the same id registered differently (another greeter
address) is updated. It imports `tartan_client` as installed: build the
wheel, install it into a virtual environment and run this file from there
(docs/clients.md). Python 3.11 or later.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from http import HTTPStatus

import httpx
from tartan_client import AuthenticatedClient, Client
from tartan_client.api.flows import get_flow, get_flow_status, start_flow
from tartan_client.api.steps import register_step, update_step
from tartan_client.models import (
    FlowAnswer,
    FlowState,
    FlowStatus,
    FlowStatusAnswer,
    StartFlow,
    Step,
    StepSaved,
)
from tartan_client.types import Response


def steps(greeter: str) -> list[Step]:
    """The walk-through's two steps, calling the greeter at `greeter`."""
    greet = {
        "id": "client-greet-py",
        "name": "Greet (Python client)",
        "type": "sync",
        "http": {"endpoint": f"http://{greeter}/greet", "timeout": "5s"},
        "attributes": {
            "name": {"role": "required", "type": "string"},
            "greeting_py": {"role": "output", "type": "string", "output": {"mapping": {"name": "greeting"}}},
        },
    }
    shout = {
        "id": "client-shout-py",
        "name": "Shout (Python client)",
        "type": "sync",
        "http": {"endpoint": f"http://{greeter}/shout", "timeout": "5s"},
        "attributes": {
            "greeting_py": {"role": "required", "type": "string", "required": {"mapping": {"name": "greeting"}}},
            "shout_py": {"role": "output", "type": "string", "output": {"mapping": {"name": "shout"}}},
        },
    }
    return [Step.from_dict(greet), Step.from_dict(shout)]


def answer(response: Response, wanted: type, what: str):
    """The parsed answer when it is the one wanted, else exit with the problem."""
    if isinstance(response.parsed, wanted):
        return response.parsed
    detail = getattr(response.parsed, "detail", None) or response.content.decode(errors="replace")
    sys.exit(f"{what}: {int(response.status_code)} {detail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=os.environ.get("TARTAN_SERVER", "http://127.0.0.1:8080"))
    parser.add_argument("--greeter", default=os.environ.get("GREETER_ADDR", "127.0.0.1:8081"))
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
        for step in steps(args.greeter):
            # Registered, or, when the id holds another definition (409),
            # replaced by this one.
            response = register_step.sync_detailed(client=client, body=step)
            if response.status_code == HTTPStatus.CONFLICT:
                response = update_step.sync_detailed(step.id, client=client, body=step)
            saved = answer(response, StepSaved, f"register {step.id}")
            print(f"{saved.step.id}: {saved.message}")

        start = StartFlow.from_dict(
            {"id": f"client-py-{uuid.uuid4()}", "goals": ["client-shout-py"], "init": {"name": ["Ada"]}}
        )
        started = answer(start_flow.sync_detailed(client=client, body=start), FlowAnswer, f"start {start.id}")
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
        shouts = state.attributes.additional_properties.get("shout_py") or []
        value = shouts[0].value if shouts else None
        print(json.dumps(value))
        if value != "HELLO, ADA!":
            sys.exit(f'shout_py is {value!r}, not "HELLO, ADA!"')


if __name__ == "__main__":
    main()
