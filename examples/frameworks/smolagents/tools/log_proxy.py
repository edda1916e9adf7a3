# A logging proxy: forwards POSTs to UPSTREAM, appends {"headers","request","response"} to LOG.
import http.server, json, sys, urllib.request, threading
upstream, log, portfile = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        req = urllib.request.Request(upstream + self.path[len("/v1"):], data=body, method="POST",
                                     headers={k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")})
        try:
            with urllib.request.urlopen(req) as r:
                status, data, ctype = r.status, r.read(), r.headers.get("Content-Type")
        except urllib.error.HTTPError as e:
            status, data, ctype = e.code, e.read(), e.headers.get("Content-Type")
        with lock, open(log, "a") as f:
            f.write(json.dumps({"agent": self.headers.get("X-Rehearsal-Agent"), "request": json.loads(body),
                                "status": status, "response": data.decode()}) + "\n")
        self.send_response(status); self.send_header("Content-Type", ctype or "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(portfile, "w").write(str(s.server_address[1]))
s.serve_forever()
