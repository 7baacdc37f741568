#!/usr/bin/env python3
"""A real provider of the official Python Dubbo implementation (PyPI `apache-dubbo` 3.0.0b1).

It registers itself in ZooKeeper through the package's own registry support
(`dubbo.Dubbo(registry_config=RegistryConfig.from_url("zookeeper://host:port"))`) and serves
the Triple protocol (gRPC over HTTP/2, h2c) with two unary methods on `--interface`:

  sayHello     request and response are protobuf `google.protobuf.StringValue` messages
               (field 1, wire type 2, UTF-8): what a tonic client with `prost`'s `String`
               (ProstCodec<String, String>) sends and expects.
  sayHelloRaw  request and response are raw UTF-8 bytes: the package's default ("direct")
               serializer, no protobuf at all.

Both answer `hello <name> from <port>` (`<name>` is the request text, `world` when empty), so
a caller can tell which provider answered. The package also serves
`org.apache.dubbo.MetricsService/cpu` on the same port (its own CPU-load handler).

Run it with the venv made by scripts/python-dubbo.sh:

  PY=$(bash scripts/python-dubbo.sh | tail -n1)
  $PY tests/python/dubbo_provider.py --zookeeper 127.0.0.1:2181 \
      --interface org.example.Greeter --port 50051 [--group g] [--version 1.0.0] \
      [--param weight=200 --param tag=gray] [--application demo-app] [--host 127.0.0.1]

It prints exactly one line `READY <port>` to stdout once the port accepts connections (the
package's logs go to stderr), then runs until SIGTERM/SIGINT, when it closes its ZooKeeper
session (its ephemeral node goes away at once) and exits 0. Exit 1 with a message on stderr
when the port is taken, ZooKeeper is unreachable (kazoo gives up after 15 s), or it cannot
register or bind. Killed with SIGKILL, its node stays until its ZooKeeper session expires
(kazoo's default session timeout, 10 s).

Before registering it deletes a leftover *ephemeral* node with exactly its own URL (a
provider on the same host:port killed without closing its session), unless
--keep-stale-node: the package alone would adopt that node (it only sets the data of an
existing node) and the node would vanish when the dead session expires. And when its
ZooKeeper session expires (ZooKeeper down for more than a few seconds), it creates its node
again once reconnected, as Java Dubbo providers do, unless --no-reregister: the package alone
never registers again.

What the package writes by itself is only `tri://<host>:<port>?service=<interface>`. It has no
configuration for group/version/application/other URL parameters on the registered provider
URL (its `RegistryConfig(group=...)` changes the ZooKeeper *root path*, and
`ApplicationConfig.name` is written nowhere), so `--group`, `--version`, `--application` and
`--param` are added to the provider URL's parameters through `ServiceConfig.to_url()`, the
URL the package registers and serves. Parameter order in the node name is: service, group,
version, application, then each --param in the order given.
"""

import argparse
import os
import signal
import socket
import sys
import threading
import time

try:
    import dubbo
    from dubbo.configs import ApplicationConfig, RegistryConfig, ServiceConfig
    from dubbo.proxy.handlers import RpcMethodHandler, RpcServiceHandler
except ImportError as exc:  # pragma: no cover - environment problem
    sys.stderr.write(
        f"dubbo_provider.py: cannot import the `dubbo` package ({exc}); run it with the venv's "
        "python: $(bash scripts/python-dubbo.sh | tail -n1)\n"
    )
    sys.exit(1)


# --- protobuf google.protobuf.StringValue, by hand (no protobuf dependency) -------------


def _read_varint(buf: bytes, i: int):
    shift = 0
    value = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _write_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_string_value(buf: bytes) -> str:
    """Field 1 (last occurrence wins, as protobuf says); unknown fields are skipped."""
    i = 0
    value = ""
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _read_varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            n, i = _read_varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated length-delimited field")
            if field == 1:
                value = buf[i : i + n].decode("utf-8")
            i += n
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return value


def encode_string_value(s: str) -> bytes:
    data = s.encode("utf-8")
    if not data:
        return b""  # the default value encodes to nothing
    return b"\x0a" + _write_varint(len(data)) + data


# --- the provider ------------------------------------------------------------------------


def _as_bytes(message) -> bytes:
    # The package hands a unary method its `EOF` marker instead of bytes when the request
    # message is empty (it drops zero-length messages): treat that as an empty request.
    if isinstance(message, (bytes, bytearray, memoryview)):
        return bytes(message)
    return b""


class Greeter:
    def __init__(self, port: int):
        self.port = port

    def answer(self, name: str) -> str:
        return f"hello {name or 'world'} from {self.port}"

    def say_hello(self, message) -> bytes:
        return encode_string_value(self.answer(decode_string_value(_as_bytes(message))))

    def say_hello_raw(self, message) -> bytes:
        return self.answer(_as_bytes(message).decode("utf-8", "replace")).encode("utf-8")


class ParamServiceConfig(ServiceConfig):
    """A ServiceConfig whose provider URL carries extra parameters (group, version, ...)."""

    def __init__(self, *args, extra_params=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._extra_params = dict(extra_params or {})

    def to_url(self):
        url = super().to_url()
        url.parameters.update(self._extra_params)
        return url


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT")
    p.add_argument("--interface", required=True, metavar="NAME")
    p.add_argument("--port", required=True, type=int, metavar="N")
    p.add_argument("--host", default="127.0.0.1", help="bind and register address")
    p.add_argument("--group", metavar="G")
    p.add_argument("--version", metavar="V")
    p.add_argument("--application", metavar="NAME")
    p.add_argument(
        "--keep-stale-node",
        action="store_true",
        help="do not delete a leftover ephemeral node of a dead provider with the same URL "
        "(the package alone would adopt it, and it vanishes when the dead session expires)",
    )
    p.add_argument(
        "--no-reregister",
        action="store_true",
        help="after the ZooKeeper session expired, stay unregistered as the package does "
        "(default: create the node again once reconnected)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="extra provider URL parameter (repeatable)",
    )
    args = p.parse_args(argv)
    if not 0 < args.port < 65536:
        p.error("--port must be 1..65535 (the package turns 0 into its default 50051)")
    if ":" not in args.zookeeper:
        p.error("--zookeeper must be HOST:PORT")
    params = {}
    if args.group is not None:
        params["group"] = args.group
    if args.version is not None:
        params["version"] = args.version
    if args.application is not None:
        params["application"] = args.application
    for kv in args.param:
        if "=" not in kv:
            p.error(f"--param needs K=V, got {kv!r}")
        k, v = kv.split("=", 1)
        if not k or k == "service":
            p.error(f"--param key {k!r} is not allowed")
        params[k] = v
    args.params = params
    return args


def _zk_clients(server):
    """The package's kazoo clients behind this server (private attributes of 3.0.0b1)."""
    try:
        transport = server._protocol._factory._transport
        return list(transport._zk_client_dict.values())
    except AttributeError:
        return []


def _close_zk(server):
    for client in _zk_clients(server):
        try:
            client.stop()  # closes the session: ZooKeeper deletes its ephemeral nodes now
            client._client.close()
        except Exception as exc:  # noqa: BLE001 - best effort on the way out
            sys.stderr.write(f"dubbo_provider.py: closing ZooKeeper session: {exc}\n")


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def _delete_stale_node(zookeeper: str, path: str) -> None:
    """Deletes a leftover ephemeral node at `path` (a provider killed without closing its
    session, on this host:port with this URL). The package's registry would find the node,
    only set its data, and the node would vanish when the dead session times out (about 10 s
    later) while this provider keeps running unregistered."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError

    zk = KazooClient(hosts=zookeeper)
    zk.start(timeout=15)
    try:
        stat = zk.exists(path)
        if stat is not None and stat.ephemeralOwner != 0:
            sys.stderr.write(
                f"dubbo_provider.py: deleting the stale ephemeral node of session "
                f"{stat.ephemeralOwner:#x}: {path}\n"
            )
            try:
                zk.delete(path)
            except NoNodeError:
                pass
    finally:
        zk.stop()
        zk.close()


class _Reregisterer:
    """Puts the provider node back after the ZooKeeper session was lost (expired), as Java
    Dubbo providers do. The package itself only logs "Connection lost" and stays unregistered
    for good once its session expired (e.g. ZooKeeper down longer than about the 10 s
    session timeout, or kazoo's reconnect backoff outlasting it)."""

    def __init__(self, server, node: str, data: bytes):
        self._node = node
        self._data = data
        self._lost = threading.Event()
        self._due = threading.Event()
        self._clients = [c._client for c in _zk_clients(server)]
        for kc in self._clients:
            kc.add_listener(self._on_state)

    def _on_state(self, state):
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST:
            self._lost.set()
        elif state == KazooState.CONNECTED and self._lost.is_set():
            self._lost.clear()
            self._due.set()  # work is done on the main thread, never in kazoo's callback

    def poll(self) -> None:
        if not self._due.is_set():
            return
        self._due.clear()
        from kazoo.exceptions import NodeExistsError

        for kc in self._clients:
            try:
                kc.create(self._node, self._data, ephemeral=True, makepath=True)
                sys.stderr.write(f"dubbo_provider.py: session was lost; registered again: {self._node}\n")
            except NodeExistsError:
                pass
            except Exception as exc:  # noqa: BLE001 - retried at the next poll
                sys.stderr.write(f"dubbo_provider.py: re-registering failed ({exc!r}); retrying\n")
                self._due.set()


def _wait_listening(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    zk_host, zk_port = args.zookeeper.rsplit(":", 1)

    greeter = Greeter(args.port)
    service_handler = RpcServiceHandler(
        service_name=args.interface,
        method_handlers=[
            RpcMethodHandler.unary(method=greeter.say_hello, method_name="sayHello"),
            RpcMethodHandler.unary(method=greeter.say_hello_raw, method_name="sayHelloRaw"),
        ],
    )
    service_config = ParamServiceConfig(
        service_handler=service_handler,
        host=args.host,
        port=args.port,
        protocol="tri",
        extra_params=args.params,
    )
    # No group/version here: on RegistryConfig they would change the ZooKeeper root path.
    registry_config = RegistryConfig.from_url(f"zookeeper://{zk_host}:{zk_port}")
    bootstrap = dubbo.Dubbo(
        application_config=ApplicationConfig(args.application or "dubbo"),
        registry_config=registry_config,
    )

    if not _port_free(args.host, args.port):
        sys.stderr.write(f"dubbo_provider.py: {args.host}:{args.port} is already in use\n")
        return 1
    # The node the package will register (ZookeeperRegistry.to_url_path) and its data.
    node = f"/dubbo/{args.interface}/providers/" + service_config.to_url().to_str(encode=True)
    node_data = service_config.to_url().location.encode("utf-8")
    if not args.keep_stale_node:
        try:
            _delete_stale_node(args.zookeeper, node)
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"dubbo_provider.py: cannot reach ZooKeeper {args.zookeeper}: {exc!r}\n")
            return 1

    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    server = None
    try:
        server = bootstrap.create_server(service_config)
        # Registers the node in ZooKeeper first, then binds the port.
        server.start()
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"dubbo_provider.py: failed to start: {exc!r}\n")
        if server is not None:
            _close_zk(server)
        sys.stderr.flush()
        os._exit(1)

    if not _wait_listening(args.host, args.port, 30):
        sys.stderr.write(f"dubbo_provider.py: {args.host}:{args.port} does not accept connections\n")
        _close_zk(server)
        sys.stderr.flush()
        os._exit(1)

    reregister = None if args.no_reregister else _Reregisterer(server, node, node_data)

    sys.stdout.write(f"READY {args.port}\n")
    sys.stdout.flush()

    while not stop.wait(0.2):
        if reregister is not None:
            reregister.poll()

    _close_zk(server)
    sys.stdout.flush()
    sys.stderr.flush()
    # The package has no server shutdown API and keeps non-daemon executor threads: leave
    # without waiting for them.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
