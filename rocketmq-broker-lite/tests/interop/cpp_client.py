# Drives the official Apache RocketMQ C++ client 2.1.0 (through its official Python binding)
# against a name server. Prints one JSON line with what happened, then exits without the
# client's shutdown (which can wait on outstanding long polls), as the captured client does.
import json
import os
import sys
import threading
import time

from rocketmq.client import (ConsumeStatus, Message, Producer, PushConsumer, TransactionMQProducer,
                             TransactionStatus)


def credentials(client):
    # ACL: RMQ_ACCESS_KEY / RMQ_SECRET_KEY in the environment sign every request (the C++
    # client's own signer, with its OnsChannel field).
    ak, sk = os.environ.get("RMQ_ACCESS_KEY"), os.environ.get("RMQ_SECRET_KEY")
    if ak and sk:
        client.set_session_credentials(ak, sk, "ALIYUN")


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def produce(ns, topic, group, bodies, tags):
    p = Producer(group)
    p.set_name_server_address(ns)
    credentials(p)
    p.start()
    sent = []
    for i, body in enumerate(bodies):
        m = Message(topic)
        m.set_keys("key-%d" % i)
        m.set_tags(tags)
        m.set_property("idx", str(i))
        m.set_body(body)
        r = p.send_sync(m)
        sent.append({"status": int(r.status), "msg_id": r.msg_id, "offset": r.offset})
    return sent


def produce_orderly(ns, topic, group, keys, per_key):
    p = Producer(group, orderly=True)
    p.set_name_server_address(ns)
    p.start()
    sent = []
    for i in range(per_key):
        for k in keys:
            m = Message(topic)
            m.set_keys(k)
            m.set_tags("Ord")
            m.set_body("%s:%d" % (k, i))
            r = p.send_orderly_with_sharding_key(m, k)
            sent.append({"status": int(r.status), "msg_id": r.msg_id})
    return sent


def produce_transaction(ns, topic, group, bodies, timeout):
    """Bodies starting commit- commit, rollback- roll back, unknown- stay unknown until the
    broker checks them (the check answers commit)."""
    checked = []
    lock = threading.Lock()

    def on_check(msg):
        with lock:
            checked.append(msg.body.decode("utf-8"))
        return TransactionStatus.COMMIT

    def local_execute(msg, user_args):
        body = msg.body.decode("utf-8")
        if body.startswith("commit-"):
            return TransactionStatus.COMMIT
        if body.startswith("rollback-"):
            return TransactionStatus.ROLLBACK
        return TransactionStatus.UNKNOWN

    p = TransactionMQProducer(group, on_check)
    p.set_name_server_address(ns)
    p.start()
    sent = []
    for body in bodies:
        m = Message(topic)
        m.set_keys(body)
        m.set_body(body)
        r = p.send_message_in_transaction(m, local_execute, None)
        sent.append({"status": int(r.status), "msg_id": r.msg_id})
    # Consume while the producer is alive: it must be there to answer the broker's checks
    # (and to send its answers before the process ends).
    expect = len([b for b in bodies if not b.startswith("rollback-")])
    got = consume(ns, topic, group.replace("tpg", "tcg"), expect, False, timeout)
    with lock:
        return sent, list(checked), got


def consume(ns, topic, group, expect, orderly, timeout):
    got = []
    lock = threading.Lock()

    def on_message(msg):
        with lock:
            got.append({
                "body": msg.body.decode("utf-8"),
                "tags": (msg.tags or b"").decode("utf-8"),
                "keys": (msg.keys or b"").decode("utf-8"),
                "id": msg.id.decode("utf-8") if isinstance(msg.id, bytes) else msg.id,
                "queue_id": msg.queue_id,
                "queue_offset": msg.queue_offset,
                "idx": (msg.get_property("idx") or b"").decode("utf-8"),
            })
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(group, orderly=orderly)
    c.set_name_server_address(ns)
    credentials(c)
    c.subscribe(topic, on_message, "*")
    c.start()
    deadline = time.time() + timeout
    while time.time() < deadline:
        with lock:
            if len(got) >= expect:
                break
        time.sleep(0.05)
    # Let late duplicates show up, if any.
    time.sleep(0.5)
    with lock:
        return list(got)


def consume_serve(ns, topic, group, stop_file, timeout):
    """Consumes until `stop_file` exists (or the timeout), printing each message as a JSON line
    at once, so that a test can act on the running consumer (admin requests to it)."""
    lock = threading.Lock()

    def on_message(msg):
        with lock:
            print(json.dumps({"body": msg.body.decode("utf-8"), "queue_id": msg.queue_id,
                              "queue_offset": msg.queue_offset}), flush=True)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(group)
    c.set_name_server_address(ns)
    c.subscribe(topic, on_message, "*")
    c.start()
    deadline = time.time() + timeout
    while time.time() < deadline and not os.path.exists(stop_file):
        time.sleep(0.05)
    c.shutdown()


def open_trace(fn_name, handle):
    """Turns the C++ client's message trace on (`CTraceModel` OPEN is 0); the binding does not
    wrap these calls."""
    import ctypes
    from rocketmq.ffi import dll
    f = getattr(dll, fn_name)
    f.argtypes = [ctypes.c_void_p, ctypes.c_int]
    f.restype = ctypes.c_int
    if f(handle, 0) != 0:
        raise SystemExit(fn_name + " failed")


def traced_serve(ns, topic, stop_file, timeout):
    """With message trace on: sends one message (no keys, so that the trace is keyed by its id)
    and consumes it, printing both as JSON lines; stays until `stop_file` exists so that the
    client's trace batches go out."""
    p = Producer("cpp_trace_pg")
    open_trace("SetProducerMessageTrace", p._handle)
    p.set_name_server_address(ns)
    p.start()
    m = Message(topic)
    m.set_tags("TagTrace")
    m.set_body("traced-by-cpp")
    r = p.send_sync(m)
    print(json.dumps({"sent": r.msg_id, "status": int(r.status)}), flush=True)
    lock = threading.Lock()

    def on_message(msg):
        with lock:
            print(json.dumps({"body": msg.body.decode("utf-8"), "queue_id": msg.queue_id,
                              "queue_offset": msg.queue_offset}), flush=True)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("cpp_trace_cg")
    open_trace("SetPushConsumerMessageTrace", c._handle)
    c.set_name_server_address(ns)
    c.subscribe(topic, on_message, "*")
    c.start()
    deadline = time.time() + timeout
    while time.time() < deadline and not os.path.exists(stop_file):
        time.sleep(0.05)


def main():
    mode, ns, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "produce":
        bodies = json.loads(sys.argv[4])
        out({"sent": produce(ns, topic, "cpp_pg_" + topic, bodies, "TagA")})
    elif mode == "produce-or-error":
        try:
            out({"sent": produce(ns, topic, "cpp_pg_" + topic, json.loads(sys.argv[4]), "TagA")})
        except Exception as e:  # the client's refusal, reported instead of raised
            out({"error": str(e)})
    elif mode == "produce-orderly":
        keys = sys.argv[4].split(",")
        out({"sent": produce_orderly(ns, topic, "cpp_opg_" + topic, keys, int(sys.argv[5]))})
    elif mode == "produce-transaction":
        sent, checked, got = produce_transaction(ns, topic, "cpp_tpg_" + topic, json.loads(sys.argv[4]),
                                                 float(sys.argv[5]))
        out({"sent": sent, "checked": checked, "got": got})
    elif mode == "consume":
        out({"got": consume(ns, topic, sys.argv[4], int(sys.argv[5]), False, float(sys.argv[6]))})
    elif mode == "consume-orderly":
        out({"got": consume(ns, topic, sys.argv[4], int(sys.argv[5]), True, float(sys.argv[6]))})
    elif mode == "traced-serve":
        traced_serve(ns, topic, sys.argv[4], float(sys.argv[5]))
        out({"stopped": True})
    elif mode == "consume-serve":
        consume_serve(ns, topic, sys.argv[4], sys.argv[5], float(sys.argv[6]))
        out({"stopped": True})
    else:
        raise SystemExit("unknown mode " + mode)
    os._exit(0)


if __name__ == "__main__":
    main()
