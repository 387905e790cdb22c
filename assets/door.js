// The door's page: a scanner's field (hardware scanners type the code and
// press Enter), the camera where the browser has BarcodeDetector, a big
// answer, and a door that keeps working without the network. Online, every
// scan is asked of the service and answered by it. Offline, a code is
// verified here with the show's public keys (WebCrypto's Ed25519) and the
// revocations last fetched, the tickets let in are remembered, and every
// scan is queued (kept in localStorage across reloads) and sent as a batch
// when the network is back. A service worker keeps the page itself, so a
// reload offline still opens it.
(() => {
  "use strict";
  const showId = decodeURIComponent(location.pathname.split("/")[2] || "");
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const key = (name) => `door:${showId}:${name}`;
  const load = (name, fallback) => {
    try { return JSON.parse(localStorage.getItem(key(name))) ?? fallback; } catch { return fallback; }
  };
  const save = (name, value) => localStorage.setItem(key(name), JSON.stringify(value));
  /** Scans sent in one upload at most (the service takes 1,000). */
  const BATCH = 1000;
  /** The longest code the service takes; a longer one is no ticket, and
   * is kept (refused) cut to this. */
  const MAX_CODE = 400;
  /** How often the page looks for the network, revocations and its queue. */
  const EVERY_MS = 2000;

  const state = {
    keys: load("keys", []),
    revoked: load("revoked", {}),
    cursor: load("cursor", 0),
    queue: load("queue", []),
    inside: load("inside", {}),
    gates: load("gates", [{ gate_id: "main", label: "Main gate" }]),
    types: load("types", {}),
    device: load("device", null) || crypto.randomUUID(),
    counter: load("counter", 0),
    online: true,
    syncing: false,
    /** Scans the service would not take (a batch entry it refused as
     * malformed), dropped so they never block the rest. */
    dropped: load("dropped", 0),
  };
  save("device", state.device);

  const $ = (id) => document.getElementById(id);

  function setOnline(online) {
    state.online = online;
    document.body.dataset.online = String(online);
    $("door-online").textContent = online ? "Online" : "Offline: scans are kept and sent later";
  }

  function showQueue() {
    const pending = state.queue.length;
    $("scan-queue").dataset.pending = String(pending);
    const dropped = state.dropped ? ` (${state.dropped} not accepted)` : "";
    $("scan-queue").textContent = `${pending} scan${pending === 1 ? "" : "s"} to send${dropped}`;
  }

  /** The answer, large: the verdict, where (or why), and whom (the
   * ticket type and name, for staff to check a child's ticket). */
  function answer(result, verdict, detail, who = "") {
    $("scan-result").dataset.result = result;
    $("scan-verdict").textContent = verdict;
    $("scan-detail").textContent = detail;
    $("scan-who").textContent = who;
  }

  /** Where a ticket admits to: its seat by section, row and number when
   * the service says them, else its seat id or area. */
  function place(of) {
    if (of.section && of.row && of.number != null) {
      return `Section ${of.section} · Row ${of.row} · Seat ${of.number}`;
    }
    return of.seat_id ? `Seat ${of.seat_id}` : of.pool_id ? `Area ${of.pool_id}` : "";
  }

  function who(of) {
    const type = of.ticket_type ? `${state.types[of.ticket_type] || of.ticket_type} ticket` : "";
    return [type, of.holder_name || ""].filter(Boolean).join(" · ");
  }

  const gateLabel = (id) => state.gates.find((g) => g.gate_id === id)?.label || id || "another gate";
  const clock = (at) => {
    const when = new Date(at);
    return Number.isNaN(when.getTime()) ? "" : ` since ${when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}`;
  };

  /** The service's JSON; a network failure throws `offline`. */
  async function api(method, path, body) {
    let response;
    try {
      response = await fetch(path, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch {
      throw new Error("offline");
    }
    const json = await response.json().catch(() => ({}));
    return { status: response.status, json };
  }

  function base64url(text) {
    const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
    const raw = atob(b64 + "===".slice((b64.length + 3) % 4));
    return Uint8Array.from(raw, (c) => c.charCodeAt(0));
  }

  /** The payload of a code whose signature verifies with a key of the
   * show's, or null. */
  async function verify(code) {
    const [payload, signature] = code.trim().split(".");
    if (!payload || !signature) return null;
    try {
      const data = JSON.parse(new TextDecoder().decode(base64url(payload)));
      const known = state.keys.find((k) => k.key_id === data.key_id && k.algorithm === "Ed25519");
      if (!known) return null;
      const publicKey = await crypto.subtle.importKey(
        "raw", base64url(known.public_key), { name: "Ed25519" }, false, ["verify"]);
      const good = await crypto.subtle.verify(
        { name: "Ed25519" }, publicKey, base64url(signature), new TextEncoder().encode(payload));
      return good ? data : null;
    } catch {
      return null;
    }
  }

  function nonce() {
    state.counter += 1;
    save("counter", state.counter);
    return `${state.device}-${state.counter}`;
  }

  const direction = () => document.querySelector('input[name="direction"]:checked').value;

  async function scan(code) {
    const asked = { code, gate: $("scan-gate").value, direction: direction(), nonce: nonce() };
    if (state.online) {
      try {
        const answered = await api("POST", `/v1/shows/${encodeURIComponent(showId)}/checkins`, asked);
        // The service could not decide (overloaded, its database away):
        // the door decides, as without the network, and the scan is sent
        // later under the same nonce (the same scan if it was recorded).
        if (answered.status < 500 && answered.status !== 429 && answered.status !== 408) {
          return online(asked, answered);
        }
      } catch {
        // No network: below.
      }
      setOnline(false);
    }
    return offline(asked);
  }

  /** The service's answer to a scan. */
  function online(asked, { status, json }) {
    if (status === 401) {
      return answer("refused", "Not checked", "This door's token has expired: open the page with a new one");
    }
    if (status === 201) {
      if (json.result === "admitted") state.inside[json.ticket_id] = { at: json.at, gate: json.gate };
      else delete state.inside[json.ticket_id];
      save("inside", state.inside);
      return answer(json.result, json.result === "admitted" ? "Admitted" : "Exited", place(json), who(json));
    }
    const why = {
      already_inside: `Already inside${clock(json.at)}, in at ${gateLabel(json.gate)}`,
      reentry_not_allowed: "No re-entry",
      not_inside: "Not inside",
      ticket_revoked: "Revoked ticket",
      invalid_code: "Not a valid ticket",
      wrong_show: "Ticket for another show",
      unknown_gate: "Unknown gate",
    }[json.code] || json.title || `Refused (${status})`;
    return answer("refused", "Refused", why);
  }

  /** Decided here, from the keys and revocations last fetched; queued. */
  async function offline(asked) {
    const payload = await verify(asked.code);
    const scanned_at = new Date().toISOString();
    const queue = (refused) => {
      state.queue.push({ ...asked, code: asked.code.slice(0, MAX_CODE), scanned_at, refused });
      save("queue", state.queue);
      showQueue();
    };
    if (!payload || payload.show_id !== showId) {
      queue(true);
      return answer("refused", "Refused", payload ? "Ticket for another show" : "Not a valid ticket");
    }
    const shown = payload.admits || {};
    if ((state.revoked[payload.ticket_id] ?? 0) >= payload.version) {
      queue(true);
      return answer("refused", "Refused", "Revoked ticket");
    }
    const inside = state.inside[payload.ticket_id];
    const isInside = Boolean(inside);
    if (asked.direction === "entry" && isInside) {
      queue(true);
      const where = inside.gate ? `${clock(inside.at)}, in at ${gateLabel(inside.gate)}` : "";
      return answer("refused", "Refused", `Already inside${where}`, who(shown));
    }
    if (asked.direction === "exit" && !isInside) {
      queue(true);
      return answer("refused", "Refused", "Not inside");
    }
    if (asked.direction === "entry") state.inside[payload.ticket_id] = { at: scanned_at, gate: asked.gate };
    else delete state.inside[payload.ticket_id];
    save("inside", state.inside);
    queue(false);
    const entry = asked.direction === "entry";
    return answer(entry ? "admitted" : "exited", entry ? "Admitted" : "Exited", place(shown), who(shown));
  }

  /** Sends the queue, a batch at a time, while the network answers. A
   * batch refused as malformed (422) is sent again one scan at a time, and
   * a scan refused alone is dropped (and counted on the page), so one bad
   * entry never holds up the rest. */
  async function sync() {
    if (state.syncing || !state.queue.length) return;
    state.syncing = true;
    try {
      let size = BATCH;
      while (state.queue.length) {
        const batch = state.queue.slice(0, size);
        const { status } = await api("POST", `/v1/shows/${encodeURIComponent(showId)}/checkins/batch`, { scans: batch });
        if (status === 422 && size > 1) {
          size = 1;
          continue;
        }
        if (status === 422) {
          state.dropped += 1;
          save("dropped", state.dropped);
        } else if (status !== 200) {
          break;
        }
        state.queue = state.queue.slice(batch.length);
        save("queue", state.queue);
        showQueue();
      }
      setOnline(true);
    } catch {
      setOnline(false);
    } finally {
      state.syncing = false;
    }
  }

  /** The show's gates, its keys and the revocations since the cursor. */
  async function refresh() {
    try {
      const show = await api("GET", `/v1/shows/${encodeURIComponent(showId)}`);
      if (show.status === 200) {
        $("door-title").textContent = `Door: ${show.json.name || showId}`;
        state.gates = show.json.checkin?.gates || [{ gate_id: "main", label: "Main gate" }];
        save("gates", state.gates);
        state.types = Object.fromEntries((show.json.ticket_types || []).map((t) => [t.ticket_type, t.label]));
        save("types", state.types);
        fillGates();
      }
      const keys = await api("GET", `/v1/shows/${encodeURIComponent(showId)}/ticket-keys`);
      if (keys.status === 200) { state.keys = keys.json.keys; save("keys", state.keys); }
      await pullRevocations();
      setOnline(true);
      await sync();
    } catch {
      setOnline(false);
    }
  }

  async function pullRevocations() {
    for (;;) {
      const path = `/v1/shows/${encodeURIComponent(showId)}/revocations?after=${state.cursor}`;
      const { status, json } = await api("GET", path);
      if (status !== 200) return;
      for (const r of json.revoked) {
        state.revoked[r.ticket_id] = Math.max(state.revoked[r.ticket_id] ?? 0, r.version);
      }
      const moved = json.next !== state.cursor;
      state.cursor = json.next;
      save("revoked", state.revoked);
      save("cursor", state.cursor);
      if (!json.revoked.length || !moved) return;
    }
  }

  function fillGates() {
    const select = $("scan-gate");
    const chosen = select.value || load("gate", "");
    select.replaceChildren(...state.gates.map((g) => {
      const option = document.createElement("option");
      option.value = g.gate_id;
      option.textContent = g.label;
      return option;
    }));
    if (state.gates.some((g) => g.gate_id === chosen)) select.value = chosen;
  }

  async function camera() {
    if (!("BarcodeDetector" in window)) return;
    const button = $("scan-camera");
    button.hidden = false;
    button.addEventListener("click", async () => {
      const video = $("scan-video");
      video.srcObject = await navigator.mediaDevices.getUserMedia({ video: { facingMode: "environment" } });
      video.hidden = false;
      await video.play();
      const detector = new window.BarcodeDetector({ formats: ["qr_code"] });
      let last = "";
      const look = async () => {
        const codes = await detector.detect(video).catch(() => []);
        const found = codes[0]?.rawValue;
        if (found && found !== last) { last = found; await scan(found); }
        requestAnimationFrame(look);
      };
      look();
    });
  }

  $("scan-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const field = $("scan-code");
    const code = field.value.trim();
    field.value = "";
    field.focus();
    if (code) await scan(code);
  });
  $("scan-gate").addEventListener("change", () => save("gate", $("scan-gate").value));
  window.addEventListener("online", refresh);
  window.addEventListener("offline", () => setOnline(false));

  fillGates();
  showQueue();
  setOnline(navigator.onLine);
  camera();
  if ("serviceWorker" in navigator) {
    // Once the worker is active the page is kept: the door says so, and a
    // reload without the network opens it again.
    navigator.serviceWorker.register(`/shows/${encodeURIComponent(showId)}/scan-sw.js`)
      .then(() => navigator.serviceWorker.ready)
      .then(() => { document.body.dataset.offlineReady = "true"; })
      .catch(() => { document.body.dataset.offlineReady = "false"; });
  }
  refresh().then(() => { document.body.dataset.ready = "true"; });
  setInterval(refresh, EVERY_MS);
})();
