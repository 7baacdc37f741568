#!/usr/bin/env python3
"""Calls a Triple (gRPC over h2c) unary method with a bare HTTP/2 client (the `h2` package,
already in the venv made by scripts/python-dubbo.sh) and prints every frame it gets back,
so the exact wire format can be seen.

  $PY tests/python/triple_call.py 127.0.0.1:50051 /org.example.Greeter/sayHello --string alice
  $PY tests/python/triple_call.py 127.0.0.1:50051 /org.example.Greeter/sayHelloRaw --raw bob

--string NAME sends protobuf google.protobuf.StringValue(NAME) (bytes 0a <len> <utf-8>);
--raw TEXT sends the UTF-8 bytes as they are. The request is one gRPC length-prefixed
message: 00 (not compressed), 4-byte big-endian length, payload. Exit 0 when grpc-status
is 0.
"""

import argparse
import socket
import struct
import sys
import time

import h2.config
import h2.connection
import h2.events


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("address", help="HOST:PORT")
    p.add_argument("path", help="/<interface>/<method>")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--string")
    g.add_argument("--raw")
    p.add_argument("--header", action="append", default=[], metavar="K=V")
    p.add_argument("--timeout", type=float, default=5.0)
    args = p.parse_args()

    if args.string is not None:
        data = args.string.encode("utf-8")
        if len(data) > 127:
            p.error("--string longer than 127 bytes needs a multi-byte varint: not supported here")
        payload = b"\x0a" + bytes([len(data)]) + data if data else b""
    else:
        payload = args.raw.encode("utf-8")
    body = b"\x00" + struct.pack(">I", len(payload)) + payload

    host, port = args.address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=args.timeout)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    conn.initiate_connection()
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", args.path),
        (":authority", args.address),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] + [tuple(h.split("=", 1)) for h in args.header]
    conn.send_headers(1, headers)
    conn.send_data(1, body, end_stream=True)
    sock.sendall(conn.data_to_send())
    print(f"> HEADERS {headers}")
    print(f"> DATA {body!r}")

    status = None
    deadline = time.monotonic() + args.timeout
    done = False
    while not done:
        if time.monotonic() > deadline:
            print("! timeout")
            break
        chunk = sock.recv(65535)
        if not chunk:
            print("! connection closed")
            break
        for ev in conn.receive_data(chunk):
            if isinstance(ev, h2.events.ResponseReceived):
                print(f"< HEADERS {ev.headers}")
                status = dict(ev.headers).get("grpc-status", status)
            elif isinstance(ev, h2.events.DataReceived):
                print(f"< DATA {ev.data!r}")
                if len(ev.data) >= 5:
                    n = struct.unpack(">I", ev.data[1:5])[0]
                    print(f"  message (flag {ev.data[0]}, {n} bytes): {ev.data[5:5 + n]!r}")
                conn.acknowledge_received_data(len(ev.data), ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                print(f"< TRAILERS {ev.headers}")
                status = dict(ev.headers).get("grpc-status", status)
            elif isinstance(ev, h2.events.StreamEnded):
                done = True
            elif isinstance(ev, h2.events.StreamReset):
                print(f"< RST_STREAM {ev.error_code!r}")
                done = True
        sock.sendall(conn.data_to_send())
    sock.close()
    return 0 if status == "0" else 1


if __name__ == "__main__":
    sys.exit(main())
