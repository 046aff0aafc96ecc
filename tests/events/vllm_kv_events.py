#!/usr/bin/env python3
"""An independent reader and writer of vLLM's KV cache event stream, for prefixsim's tests.

Written from vLLM's schema (vllm/distributed/kv_events.py; docs/kv-events.md), with
python3-msgpack only: it shares no code with prefixsim's C++ encoder and decoder.

  decode FILE        read a length-prefixed msgpack log (4-byte big-endian length, then one
                     KVEventBatch payload), check every batch against vLLM's schema, and print
                     the blocks still cached, one "group hash count" line each, sorted.
  subscribe PUB REPLAY TOPIC LOG
                     connect a SUB socket to PUB (frames: topic, 8-byte big-endian sequence
                     number, payload) and DEALER sockets to the replay ROUTER (a request is an
                     empty delimiter and the start sequence, 8 bytes big-endian; the answer is
                     (seq, payload) messages, then the end marker: seq -1 with an empty payload). Follow the live stream,
                     filling gaps from the replay socket, until it holds every batch of LOG (the
                     log the publisher writes when it is done), byte for byte; then ask for a
                     replay of the second half and check it. Prints the cached blocks as
                     `decode` does and "replayed FIRST..LAST".
  reencode IN OUT LAYOUT STEP
                     decode IN, write it anew (events as maps or, LAYOUT "array", as vLLM's
                     older positional arrays); STEP >= 0 adds a block the engine never stored
                     to that batch and prints its group.
  encode SCRIPT FILE write a log from a cache history given as JSON: a list of steps, each
                     {"ts": float, "rank": int, "events": [["store", group, [hashes], parent,
                     block_size] | ["remove", group, [hashes]] | ["clear"]]}.
"""
import json
import struct
import sys

import msgpack

STORED_FIELDS = ["type", "block_hashes", "parent_block_hash", "token_ids", "block_size",
                 "lora_id", "medium", "lora_name", "extra_keys", "group_idx",
                 "kv_cache_spec_kind", "kv_cache_spec_sliding_window"]
REMOVED_FIELDS = ["type", "block_hashes", "medium", "group_idx"]
REQUIRED_STORED = STORED_FIELDS[:8]  # fields without a default in vLLM: always encoded


def fail(msg):
    sys.stderr.write("vllm_kv_events.py: " + msg + "\n")
    sys.exit(1)


def check_hash(h, where):
    if not isinstance(h, int) or h < 0 or h >= 1 << 64:
        fail(f"{where}: block hash {h!r} is not a 64-bit unsigned int")


def check_event(e, where):
    if not isinstance(e, dict):
        fail(f"{where}: event is {type(e).__name__}, expected a map (tagged struct)")
    keys = list(e.keys())
    if not keys or keys[0] != "type":
        fail(f"{where}: the tag 'type' must be the first key, got {keys}")
    kind = e["type"]
    if kind == "BlockStored":
        order = STORED_FIELDS
        for k in REQUIRED_STORED:
            if k not in e:
                fail(f"{where}: BlockStored lacks {k}")
        for h in e["block_hashes"]:
            check_hash(h, where)
        if e["parent_block_hash"] is not None:
            check_hash(e["parent_block_hash"], where)
        # Full blocks of block_size tokens; only a partial tail block (partial hits) is shorter.
        n = len(e["block_hashes"])
        if not (n - 1) * e["block_size"] < len(e["token_ids"]) <= n * e["block_size"]:
            fail(f"{where}: {len(e['token_ids'])} token ids for {len(e['block_hashes'])} blocks "
                 f"of {e['block_size']}")
        if len(e["extra_keys"]) != len(e["block_hashes"]):
            fail(f"{where}: extra_keys needs one entry per block")
    elif kind == "BlockRemoved":
        order = REMOVED_FIELDS
        for h in e["block_hashes"]:
            check_hash(h, where)
    elif kind == "AllBlocksCleared":
        order = ["type"]
    else:
        fail(f"{where}: unknown event type {kind!r}")
    unknown = [k for k in keys if k not in order]
    if unknown:
        fail(f"{where}: unknown fields {unknown}")
    if keys != [k for k in order if k in e]:
        fail(f"{where}: fields out of vLLM's order: {keys}")
    for k, v in e.items():  # omit_defaults: a defaulted field equal to None is not written
        if k in ("group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window") and v is None:
            fail(f"{where}: {k} is None but should have been omitted")


def check_batch(payload, where):
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if not isinstance(batch, list) or len(batch) not in (2, 3):
        fail(f"{where}: a batch must be an array [ts, events, data_parallel_rank]")
    if not isinstance(batch[0], float):
        fail(f"{where}: ts must be a float")
    for i, e in enumerate(batch[1]):
        check_event(e, f"{where} event {i}")
    return batch


def apply(cached, batch):
    for e in batch[1]:
        if e["type"] == "AllBlocksCleared":
            cached.clear()
            continue
        group = e.get("group_idx") or 0
        for h in e["block_hashes"]:
            key = (group, h)
            if e["type"] == "BlockStored":
                cached[key] = cached.get(key, 0) + 1
            else:
                if key not in cached:
                    fail(f"remove of an uncached block {key}")
                cached[key] -= 1
                if cached[key] == 0:
                    del cached[key]


def print_cached(cached):
    for (group, h), n in sorted(cached.items()):
        print(f"{group} {h} {n}")


def decode(path):
    data = open(path, "rb").read()
    pos, index, cached = 0, 0, {}
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        apply(cached, check_batch(data[pos + 4:pos + 4 + n], f"batch {index}"))
        pos += 4 + n
        index += 1
    print_cached(cached)


def read_log_payloads(path):
    data = open(path, "rb").read()
    pos, payloads = 0, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        payloads.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return payloads


def request_replay(replay, start):
    """Ask the ROUTER for every batch from `start`; returns {seq: payload} until the end marker.
    `replay` is a DEALER: the router answers one request with many messages, and a REQ socket
    would take only the first. The DEALER adds the empty delimiter frame a REQ would."""
    replay.send_multipart([b"", start.to_bytes(8, "big")])
    out = {}
    while True:
        if not replay.poll(30000):
            fail("no answer from the replay socket")
        frames = replay.recv_multipart()
        if len(frames) != 3 or frames[0] != b"":
            fail(f"a replay answer is (delimiter, seq, payload), got {len(frames)} frames")
        seq = int.from_bytes(frames[1], "big", signed=True)
        if seq == -1:
            if frames[2]:
                fail("the end marker must carry an empty payload")
            return out
        out[seq] = frames[2]


def subscribe(pub, replay_endpoint, topic, log_path):
    """Follow the live stream (asking the replay socket for any gap) until every batch of the
    log that the publisher writes at the end is in; then check a replayed range."""
    import os
    import zmq
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
    sub.connect(pub)
    payloads = {}
    expected = None
    idle = 0
    while expected is None or len(payloads) < len(expected):
        if sub.poll(100):
            idle = 0
            frames = sub.recv_multipart()
            if len(frames) != 3:
                fail(f"expected 3 frames (topic, seq, payload), got {len(frames)}")
            t, seq_bytes, payload = frames
            if t != topic.encode() or len(seq_bytes) != 8:
                fail("bad topic or sequence frame")
            seq = int.from_bytes(seq_bytes, "big")
            missing = [s for s in range(seq) if s not in payloads]
            if missing:  # published before we joined, or dropped: the replay socket has it
                replay = ctx.socket(zmq.DEALER)
                replay.connect(replay_endpoint)
                for s, p in request_replay(replay, missing[0]).items():
                    payloads.setdefault(s, p)
            payloads.setdefault(seq, payload)
        else:
            idle += 1
            if idle > 600:
                fail(f"live stream stalled with {len(payloads)} batches")
        if expected is None and os.path.exists(log_path):
            expected = read_log_payloads(log_path)
    cached = {}
    for s in range(len(expected)):
        if payloads.get(s) != expected[s]:
            fail(f"batch {s} differs between the stream and the log")
        apply(cached, check_batch(payloads[s], f"batch {s}"))
    start = len(expected) // 2
    late = ctx.socket(zmq.DEALER)  # a consumer that joins after the run, as a restarted router does
    late.connect(replay_endpoint)
    ranged = request_replay(late, start)
    if sorted(ranged) != list(range(start, len(expected))):
        fail(f"replay from {start} served {sorted(ranged)[:5]}...")
    for s, p in ranged.items():
        if p != expected[s]:
            fail(f"replayed batch {s} differs from the live one")
    print_cached(cached)
    print(f"replayed {start}..{len(expected) - 1}")


def rank_of(batch):
    return batch[2] if len(batch) > 2 and batch[2] is not None else 0


def print_cached_by_rank(cached):
    for rank in sorted(cached):
        for (group, h), n in sorted(cached[rank].items()):
            print(f"{rank} {group} {h} {n}")


def decode_by_rank(path):
    """A fleet's log: every replica's cache, by data_parallel_rank."""
    cached = {}
    for index, payload in enumerate(read_log_payloads(path)):
        batch = check_batch(payload, f"batch {index}")
        apply(cached.setdefault(rank_of(batch), {}), batch)
    print_cached_by_rank(cached)


def offset_port(endpoint, rank):
    """vLLM's offset of a tcp endpoint for data-parallel rank `rank`: the port plus the rank."""
    host, port = endpoint.rsplit(":", 1)
    return f"{host}:{int(port) + rank}"


def subscribe_fleet(pub, replay_endpoint, topic, log_path, replicas):
    """One subscriber per replica, each on its rank's offset port with its own sequence numbers,
    until every replica's batches of the log are in; rebuilds every replica's cache, then checks a
    replayed range of the last replica."""
    import os
    import zmq
    ctx = zmq.Context()
    poller = zmq.Poller()
    subs = []
    for r in range(replicas):
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        sub.connect(offset_port(pub, r))
        poller.register(sub, zmq.POLLIN)
        subs.append(sub)
    payloads = [{} for _ in range(replicas)]
    expected = None
    idle = 0
    while expected is None or any(len(payloads[r]) < len(expected[r]) for r in range(replicas)):
        ready = dict(poller.poll(100))
        if not ready:
            idle += 1
            if idle > 600:
                fail(f"live streams stalled with {[len(p) for p in payloads]} batches")
        for r, sub in enumerate(subs):
            if sub not in ready:
                continue
            idle = 0
            frames = sub.recv_multipart()
            if len(frames) != 3:
                fail(f"expected 3 frames (topic, seq, payload), got {len(frames)}")
            t, seq_bytes, payload = frames
            if t != topic.encode() or len(seq_bytes) != 8:
                fail("bad topic or sequence frame")
            if rank_of(check_batch(payload, f"replica {r}")) != r:
                fail(f"a batch on replica {r}'s port names another rank")
            seq = int.from_bytes(seq_bytes, "big")
            missing = [s for s in range(seq) if s not in payloads[r]]
            if missing:
                replay = ctx.socket(zmq.DEALER)
                replay.connect(offset_port(replay_endpoint, r))
                for s, p in request_replay(replay, missing[0]).items():
                    payloads[r].setdefault(s, p)
            payloads[r].setdefault(seq, payload)
        if expected is None and os.path.exists(log_path):
            expected = [[] for _ in range(replicas)]
            for index, p in enumerate(read_log_payloads(log_path)):
                rank = rank_of(check_batch(p, f"log batch {index}"))
                if rank >= replicas:
                    fail(f"log batch {index} names rank {rank}")
                expected[rank].append(p)
    cached = {}
    for r in range(replicas):
        for s in range(len(expected[r])):
            if payloads[r].get(s) != expected[r][s]:
                fail(f"replica {r} batch {s} differs between the stream and the log")
            apply(cached.setdefault(r, {}), check_batch(payloads[r][s], f"replica {r} batch {s}"))
    last = replicas - 1
    start = len(expected[last]) // 2
    late = ctx.socket(zmq.DEALER)
    late.connect(offset_port(replay_endpoint, last))
    ranged = request_replay(late, start)
    if sorted(ranged) != list(range(start, len(expected[last]))):
        fail(f"replica {last}'s replay from {start} served {sorted(ranged)[:5]}...")
    print_cached_by_rank(cached)
    print(f"replayed replica {last} {start}..{len(expected[last]) - 1}")


def encode(script_path, out_path):
    steps = json.load(open(script_path))
    with open(out_path, "wb") as out:
        for step in steps:
            events = []
            for e in step["events"]:
                if e[0] == "store":
                    _, group, hashes, parent, block_size = e
                    events.append({"type": "BlockStored", "block_hashes": hashes,
                                   "parent_block_hash": parent,
                                   "token_ids": [7] * (len(hashes) * block_size),
                                   "block_size": block_size, "lora_id": None, "medium": "GPU",
                                   "lora_name": None, "extra_keys": [None] * len(hashes),
                                   "group_idx": group})
                elif e[0] == "remove":
                    events.append({"type": "BlockRemoved", "block_hashes": e[2], "medium": "GPU",
                                   "group_idx": e[1]})
                else:
                    events.append({"type": "AllBlocksCleared"})
            payload = msgpack.packb([float(step["ts"]), events, step.get("rank", 0)])
            out.write(struct.pack(">I", len(payload)) + payload)


def reencode(in_path, out_path, layout, perturb_step):
    """Decode IN and write it anew with this module's own encoder, events in `layout` ("map":
    current vLLM, "array": vLLM before it dropped array_like). With perturb_step >= 0, batch
    perturb_step also stores a block that the engine never had, in the group of its first event;
    prints that group."""
    with open(out_path, "wb") as out:
        for index, payload in enumerate(read_log_payloads(in_path)):
            ts, events, rank = check_batch(payload, f"batch {index}")
            if index == perturb_step:
                group = events[0].get("group_idx", 0) if events else 0
                events = events + [{"type": "BlockStored", "block_hashes": [12345],
                                    "parent_block_hash": None, "token_ids": [1],
                                    "block_size": 1, "lora_id": None, "medium": "GPU",
                                    "lora_name": None, "extra_keys": [None],
                                    "group_idx": group}]
                print(group)
            if layout == "array":
                events = [[e["type"]] + [e[k] for k in
                                          (STORED_FIELDS if e["type"] == "BlockStored"
                                           else REMOVED_FIELDS)[1:] if k in e]
                          for e in events]
            payload = msgpack.packb([ts, events, rank])
            out.write(struct.pack(">I", len(payload)) + payload)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "decode":
        decode(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "decode-by-rank":
        decode_by_rank(sys.argv[2])
    elif len(sys.argv) == 7 and sys.argv[1] == "subscribe-fleet":
        subscribe_fleet(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
    elif len(sys.argv) == 6 and sys.argv[1] == "subscribe":
        subscribe(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif len(sys.argv) == 6 and sys.argv[1] == "reencode":
        reencode(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif len(sys.argv) == 4 and sys.argv[1] == "encode":
        encode(sys.argv[2], sys.argv[3])
    else:
        fail(__doc__)
