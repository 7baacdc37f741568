"""The Nacos tests' independent writer: the official Python Nacos SDK's gRPC client
(nacos-sdk-python 2.0.x, module `v2.nacos`, the protocol of the Java client Dubbo 3.3 uses).

Usage: nacos_writer.py SERVER_ADDR NAMESPACE [USERNAME PASSWORD]

Reads one JSON command per line on stdin, answers one JSON line on stdout
({"ok": true, ...} or {"ok": false, "error": "..."}). Commands:
  {"op": "register_url", "url": "dubbo://10.0.0.1:20880/com.foo.Bar?version=1.0&group=g",
   "group": "DEFAULT_GROUP", "weight": 1.0, "healthy": true, "enabled": true}
      registers the provider as Dubbo's NacosRegistry does (createInstance): the service
      providers:<interface>:<version>:<group> (empty parts kept, `$` -> `___`), ip and port
      from the URL, metadata = every URL parameter + category=providers, protocol, path.
  {"op": "deregister_url", "url": ..., "group": ...}
  {"op": "batch_urls", "urls": [...], "group": ...}   many registrations, 200 at a time
  {"op": "publish", "data_id": ..., "group": "dubbo", "content": ...}
  {"op": "remove", "data_id": ..., "group": "dubbo"}
  {"op": "get", "data_id": ..., "group": "dubbo"}
Instances are ephemeral: they live while this process runs (the client registers them again
after a reconnection).
"""

import asyncio
import json
import sys
from urllib.parse import parse_qsl, urlsplit, unquote

from v2.nacos import (ClientConfigBuilder, ConfigParam,
                      DeregisterInstanceParam, NacosConfigService, NacosNamingService,
                      RegisterInstanceParam)


def dubbo_instance(url, weight=1.0, healthy=True, enabled=True):
    """(service name, RegisterInstanceParam fields) as Dubbo's NacosRegistry registers `url`."""
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    path = unquote(parts.path.lstrip("/"))
    interface = params.get("interface") or path
    name = "providers:%s:%s:%s" % (interface, params.get("version", ""), params.get("group", ""))
    metadata = dict(params)
    metadata.setdefault("category", "providers")
    metadata["protocol"] = parts.scheme
    metadata["path"] = path
    host = parts.hostname
    return name.replace("$", "___"), dict(ip=host, port=parts.port, weight=weight,
                                          healthy=healthy, enabled=enabled, metadata=metadata)


async def main():
    server, namespace = sys.argv[1], sys.argv[2]
    builder = (ClientConfigBuilder().server_address(server).namespace_id(namespace)
               .log_level("ERROR").log_dir("/tmp/routechain-nacos-writer-logs")
               .cache_dir("/tmp/routechain-nacos-writer-cache/%d" % id(server)))
    if len(sys.argv) > 4:
        builder = builder.username(sys.argv[3]).password(sys.argv[4])
    config = builder.build()
    naming = await NacosNamingService.create_naming_service(config)
    configs = await NacosConfigService.create_config_service(config)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    while True:
        line = await reader.readline()
        if not line:
            break
        try:
            cmd = json.loads(line)
            op = cmd["op"]
            group = cmd.get("group", "DEFAULT_GROUP")
            reply = {"ok": True}
            if op == "register_url":
                name, fields = dubbo_instance(cmd["url"], cmd.get("weight", 1.0),
                                              cmd.get("healthy", True), cmd.get("enabled", True))
                reply["ok"] = await naming.register_instance(RegisterInstanceParam(
                    service_name=name, group_name=group, **fields))
                reply["service"] = name
            elif op == "deregister_url":
                name, fields = dubbo_instance(cmd["url"])
                reply["ok"] = await naming.deregister_instance(DeregisterInstanceParam(
                    service_name=name, group_name=group, ip=fields["ip"], port=fields["port"]))
            elif op == "batch_urls":
                # One registration per instance, 200 at a time (rnacos 0.8 answers no
                # batch registration).
                params = []
                for url in cmd["urls"]:
                    name, fields = dubbo_instance(url)
                    params.append(RegisterInstanceParam(service_name=name, group_name=group,
                                                        **fields))
                for i in range(0, len(params), 200):
                    oks = await asyncio.gather(*(naming.register_instance(p)
                                                 for p in params[i:i + 200]))
                    reply["ok"] = reply["ok"] and all(oks)
            elif op == "publish":
                reply["ok"] = await configs.publish_config(ConfigParam(
                    data_id=cmd["data_id"], group=cmd.get("group", "dubbo"),
                    content=cmd["content"]))
            elif op == "remove":
                reply["ok"] = bool(await configs.remove_config(ConfigParam(
                    data_id=cmd["data_id"], group=cmd.get("group", "dubbo"))) or True)
            elif op == "get":
                reply["content"] = await configs.get_config(ConfigParam(
                    data_id=cmd["data_id"], group=cmd.get("group", "dubbo")))
            else:
                reply = {"ok": False, "error": "unknown op %r" % op}
        except Exception as e:  # noqa: BLE001 (every failure is an answer, never a hang)
            reply = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(reply), flush=True)
    await naming.shutdown()
    await configs.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
