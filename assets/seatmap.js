// The seat map: the show's seats drawn from its definition, coloured live
// from the availability stream, and a buyer's hold, extension, payment and
// release through the public API. No framework, nothing fetched from
// elsewhere. The stable data-* attributes are part of the contract
// (docs/api.md, "Seat map").
(() => {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const SEAT = 20; // seat square, px
  const PITCH = 24; // distance between seats in a row
  const ROW_PITCH = 26;
  const LEFT = 34; // room for row labels
  const MAX_BEST = 10; // docs/api.md: best available, quantity 1..10

  const parts = location.pathname.split("/").filter(Boolean);
  const showId = decodeURIComponent(parts[parts.length - 1] || "");
  const $ = (selector) => document.querySelector(selector);

  const seats = new Map(); // seat_id -> { spec, el, label, cross, status }
  const rows = []; // [[seat_id, ...], ...] per drawn row, for arrow keys
  const pools = new Map(); // pool_id -> { spec, el, count }
  const selected = new Set();
  let hold = null;
  let clockOffset = 0; // server time - local time, from the Date header

  const tokenInput = $("#token");
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) tokenInput.value = fragment.get("token");

  function say(text, tone) {
    const message = $("#message");
    message.textContent = text;
    message.dataset.tone = tone || "error";
  }

  function list(items) {
    return (items || []).join(", ");
  }

  function serverNow() {
    return Date.now() + clockOffset;
  }

  async function api(method, path, body, idempotencyKey) {
    const headers = { Accept: "application/json" };
    const token = tokenInput.value.trim();
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
    let response;
    try {
      response = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      return { ok: false, status: 0, problem: { code: "network", detail: String(error) } };
    }
    const date = Date.parse(response.headers.get("date") || "");
    if (!Number.isNaN(date)) clockOffset = date - Date.now();
    let data = null;
    if (response.status !== 204) {
      try {
        data = await response.json();
      } catch (error) {
        data = null;
      }
    }
    if (response.ok) return { ok: true, status: response.status, data };
    return { ok: false, status: response.status, problem: data || {} };
  }

  // Every problem code a buyer can meet here, in words.
  function explain(problem) {
    switch (problem.code) {
      case "seat_taken":
        return `Sorry, ${list(problem.seats) || "a seat you chose"} ${(problem.seats || []).length > 1 ? "were" : "was"} just taken by someone else. Choose other seats.`;
      case "sold_out":
        return `Not enough places left: ${problem.available} free right now.`;
      case "buyer_limit_reached":
        return `You have reached this show's limit of ${problem.limit} seats per buyer (you have ${problem.current}).`;
      case "no_adjacent_seats":
        return "No block of that many seats side by side is free right now.";
      case "hold_expired":
        if (problem.voided) return "Your hold ended before the payment went through; nothing was charged.";
        return problem.refunded
          ? "Your hold expired while paying; the charge was refunded."
          : "Your hold expired. Choose seats again.";
      case "hold_released":
        return "This hold was released.";
      case "hold_converted":
        return "This hold is already booked.";
      case "hold_extension_limit":
        return "This hold cannot be extended any further.";
      case "payment_declined":
        if (problem.reversed) return "The payment could not be completed, so the booking was undone; nothing was charged.";
        return "The payment was declined. Try another card; your seats stay held until the countdown ends.";
      case "payment_unavailable":
        return "The payment provider is not answering. Try again: you will not be charged twice.";
      case "admission_required":
        return "This sale opens through a waiting room: join the queue, and choose seats once you are let in.";
      case "rate_limited":
        return "Too many requests at once. Wait a moment and try again.";
      case "unauthorized":
        return "Enter a valid buyer token first.";
      case "forbidden":
        return "This token may not do that.";
      case "busy":
        return "The service is busy. Try again in a moment.";
      case "network":
        return "No connection to the service. Check your network and try again.";
      default:
        return problem.detail || problem.title || "Something went wrong.";
    }
  }

  function words(status) {
    return { available: "available", selected: "chosen by you", held: "held", booked: "booked" }[status];
  }

  function mine(seatId) {
    return Boolean(hold && (hold.seats || []).includes(seatId));
  }

  function paint(seatId) {
    const seat = seats.get(seatId);
    if (!seat) return;
    const shown = selected.has(seatId) && seat.status === "available" ? "selected" : seat.status;
    seat.el.dataset.status = shown;
    seat.label.dataset.status = shown;
    seat.el.dataset.mine = mine(seatId) ? "true" : "false";
    seat.el.setAttribute("aria-checked", shown === "selected" ? "true" : "false");
    seat.el.setAttribute("aria-disabled", shown === "held" || shown === "booked" ? "true" : "false");
    const yours = mine(seatId) ? ", yours" : "";
    seat.el.setAttribute(
      "aria-label",
      `Seat ${seatId}, section ${seat.spec.section}, row ${seat.spec.row}, number ${seat.spec.number}: ${words(shown)}${yours}`,
    );
    seat.title.textContent = `${seatId}: ${words(shown)}${yours}`;
    seat.cross.setAttribute("visibility", seat.status === "booked" ? "visible" : "hidden");
  }

  function setStatus(seatId, status) {
    const seat = seats.get(seatId);
    if (!seat) return;
    seat.status = status;
    if (selected.has(seatId) && status !== "available") {
      selected.delete(seatId);
      if (!mine(seatId)) say(`Seat ${seatId} was just taken by someone else.`);
      showSelection();
    }
    paint(seatId);
  }

  function showSelection() {
    const chosen = [...selected];
    $("#selection").textContent = chosen.length
      ? `Selected: ${chosen.join(", ")} (${chosen.length} seat${chosen.length > 1 ? "s" : ""}).`
      : "No seat selected.";
    document.querySelector('[data-action="hold"]').disabled = chosen.length === 0 || Boolean(hold);
  }

  function toggle(seatId) {
    const seat = seats.get(seatId);
    if (!seat) return;
    if (seat.status !== "available") {
      say(mine(seatId) ? `Seat ${seatId} is in your hold.` : `Seat ${seatId} is ${seat.status}.`);
      return;
    }
    if (selected.has(seatId)) selected.delete(seatId);
    else selected.add(seatId);
    say("", "ok");
    paint(seatId);
    showSelection();
  }

  function moveFocus(seatId, key) {
    const r = rows.findIndex((row) => row.includes(seatId));
    if (r < 0) return;
    const i = rows[r].indexOf(seatId);
    let target = null;
    if (key === "ArrowLeft") target = rows[r][i - 1];
    if (key === "ArrowRight") target = rows[r][i + 1];
    if (key === "ArrowUp" && r > 0) target = rows[r - 1][Math.min(i, rows[r - 1].length - 1)];
    if (key === "ArrowDown" && r + 1 < rows.length) target = rows[r + 1][Math.min(i, rows[r + 1].length - 1)];
    if (target) seats.get(target).el.focus();
  }

  function el(name, attributes, parent) {
    const node = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }

  function draw(show) {
    $("#show-name").textContent = show.name;
    document.title = `${show.name}: seat map`;
    $("#show-when").textContent = new Date(show.starts_at).toLocaleString();
    const sections = new Map();
    for (const spec of show.seats || []) {
      if (!sections.has(spec.section)) sections.set(spec.section, new Map());
      const byRow = sections.get(spec.section);
      if (!byRow.has(spec.row)) byRow.set(spec.row, []);
      byRow.get(spec.row).push(spec);
    }
    const container = $("#sections");
    const bestSection = $("#best-section");
    for (const [section, byRow] of sections) {
      const option = document.createElement("option");
      option.value = section;
      option.textContent = section;
      bestSection.appendChild(option);
      const block = document.createElement("div");
      block.className = "section";
      const heading = document.createElement("h2");
      heading.textContent = `Section ${section}`;
      block.appendChild(heading);
      const widest = Math.max(...[...byRow.values()].map((r) => r.length));
      const svg = el("svg", {
        class: "section-map",
        role: "group",
        "aria-label": `Section ${section}`,
        width: LEFT + widest * PITCH + 4,
        height: byRow.size * ROW_PITCH + 4,
      });
      let r = 0;
      for (const [row, specs] of byRow) {
        specs.sort((a, b) => a.number - b.number);
        const y = 2 + r * ROW_PITCH;
        el("text", { class: "row-label", x: 2, y: y + SEAT / 2 }, svg).textContent = row;
        const drawn = [];
        specs.forEach((spec, i) => {
          const x = LEFT + i * PITCH;
          const rect = el("rect", {
            class: "seat",
            x,
            y,
            width: SEAT,
            height: SEAT,
            rx: 3,
            tabindex: 0,
            role: "checkbox",
            "data-seat-id": spec.seat_id,
            "data-status": "available",
          }, svg);
          const title = el("title", {}, rect);
          const cross = el("path", {
            class: "cross",
            d: `M${x + 4} ${y + 4} L${x + SEAT - 4} ${y + SEAT - 4} M${x + SEAT - 4} ${y + 4} L${x + 4} ${y + SEAT - 4}`,
            visibility: "hidden",
          }, svg);
          const label = el("text", { class: "seat-label", x: x + SEAT / 2, y: y + SEAT / 2 }, svg);
          label.textContent = String(spec.number);
          rect.addEventListener("click", () => toggle(spec.seat_id));
          rect.addEventListener("keydown", (event) => {
            if (event.key === "Enter" || event.key === " ") {
              event.preventDefault();
              toggle(spec.seat_id);
            } else if (event.key.startsWith("Arrow")) {
              event.preventDefault();
              moveFocus(spec.seat_id, event.key);
            }
          });
          seats.set(spec.seat_id, { spec, el: rect, label, cross, title, status: "available" });
          drawn.push(spec.seat_id);
          paint(spec.seat_id);
        });
        rows.push(drawn);
        r += 1;
      }
      block.appendChild(svg);
      container.appendChild(block);
    }
    for (const spec of show.pools || []) {
      const block = document.createElement("div");
      block.className = "pool";
      block.dataset.poolId = spec.pool_id;
      block.dataset.available = String(spec.capacity);
      const name = document.createElement("span");
      name.textContent = `Standing: ${spec.pool_id}`;
      const count = document.createElement("span");
      count.className = "count";
      const quantity = document.createElement("input");
      quantity.type = "number";
      quantity.min = "1";
      quantity.max = "20";
      quantity.value = "2";
      quantity.setAttribute("aria-label", `Places in ${spec.pool_id}`);
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.action = "hold-pool";
      button.textContent = "Hold places";
      button.addEventListener("click", () =>
        placeHold({ pool_id: spec.pool_id, quantity: Number(quantity.value) }),
      );
      block.append(name, count, quantity, button);
      $("#pools").appendChild(block);
      pools.set(spec.pool_id, { spec, el: block, count });
      setPool({ pool_id: spec.pool_id, capacity: spec.capacity, available: spec.capacity, held: 0, sold: 0 });
    }
  }

  function setPool(figures) {
    const pool = pools.get(figures.pool_id);
    if (!pool) return;
    pool.el.dataset.available = String(figures.available);
    pool.count.textContent = `${figures.available} of ${figures.capacity} places available (${figures.held} held, ${figures.sold} sold)`;
  }

  function setHold(next) {
    const before = hold ? hold.seats || [] : [];
    hold = next;
    const box = $("#hold");
    box.hidden = false;
    box.dataset.holdId = hold.hold_id;
    box.dataset.expiresAt = hold.expires_at;
    $("#hold-what").textContent = hold.pool_id
      ? `${hold.quantity} place${hold.quantity > 1 ? "s" : ""} in ${hold.pool_id}`
      : `Seats ${list(hold.seats)}`;
    $("#hold-until").textContent = `until ${new Date(hold.expires_at).toLocaleTimeString()}`;
    for (const seatId of [...before, ...(hold.seats || [])]) paint(seatId);
    tick();
    showSelection();
  }

  function clearHold() {
    const before = hold ? hold.seats || [] : [];
    hold = null;
    const box = $("#hold");
    box.hidden = true;
    delete box.dataset.holdId;
    delete box.dataset.expiresAt;
    for (const seatId of before) paint(seatId);
    showSelection();
  }

  function tick() {
    if (!hold) return;
    const left = Date.parse(hold.expires_at) - serverNow();
    if (left <= 0) {
      $("#countdown").textContent = "0:00";
      clearHold();
      say("Your hold expired. Choose seats again.");
      return;
    }
    const seconds = Math.ceil(left / 1000);
    $("#countdown").textContent = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
  }

  async function busy(button, work) {
    button.disabled = true;
    try {
      await work();
    } finally {
      button.disabled = false;
      showSelection();
    }
  }

  async function placeHold(body) {
    if (hold) {
      say("Pay for or release your current hold first.");
      return;
    }
    const answer = await api("POST", `/v1/shows/${encodeURIComponent(showId)}/holds`, body, crypto.randomUUID());
    if (!answer.ok) {
      say(explain(answer.problem));
      if (answer.problem.code === "admission_required") followQueue();
      return;
    }
    selected.clear();
    setHold(answer.data);
    say("Held. Pay before the countdown ends.", "ok");
  }

  function bind(action, handler) {
    const button = document.querySelector(`[data-action="${action}"]`);
    button.addEventListener("click", () => busy(button, handler));
  }

  bind("hold", () => placeHold({ seats: [...selected] }));
  bind("best", () => {
    const quantity = Number($("#best-quantity").value);
    if (!Number.isInteger(quantity) || quantity < 1 || quantity > MAX_BEST) {
      say(`Best available finds 1 to ${MAX_BEST} seats.`);
      return Promise.resolve();
    }
    const section = $("#best-section").value;
    return placeHold({ best_available: section ? { quantity, section } : { quantity } });
  });
  bind("extend", async () => {
    if (!hold) return;
    const answer = await api("POST", `/v1/holds/${hold.hold_id}/extend`, {});
    if (!answer.ok) {
      say(explain(answer.problem));
      if (["hold_expired", "hold_released", "hold_converted"].includes(answer.problem.code)) clearHold();
      return;
    }
    setHold(answer.data);
    say("More time: your hold now lasts longer.", "ok");
  });
  bind("release", async () => {
    if (!hold) return;
    const answer = await api("DELETE", `/v1/holds/${hold.hold_id}`);
    if (!answer.ok) {
      say(explain(answer.problem));
      return;
    }
    clearHold();
    say("Released.", "ok");
  });
  // Payments: the simulator's methods, or a card through Stripe.js (its
  // fields live in Stripe's frames; the card number never reaches us).
  const provider = document.body.dataset;
  let stripe = null;
  let card = null;

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = resolve;
      script.onerror = reject;
      document.head.appendChild(script);
    });
  }

  async function setUpPayments() {
    if (provider.paymentProvider !== "stripe") return;
    $("#simulator-payment").hidden = true;
    $("#card-payment").hidden = false;
    try {
      await loadScript(provider.stripeJs);
      stripe = window.Stripe(provider.stripeKey);
      card = stripe.elements().create("card");
      card.mount("#card-element");
    } catch (error) {
      say("The card form could not be loaded. Check your connection and reload.");
    }
  }

  // The payment method to send: the simulator's choice, or a Stripe
  // PaymentMethod made from the card fields.
  async function paymentMethod() {
    if (provider.paymentProvider !== "stripe") return $("#payment-method").value;
    if (!stripe) throw new Error("The card form is not ready.");
    const made = await stripe.createPaymentMethod({ type: "card", card });
    if (made.error) throw new Error(made.error.message);
    return made.paymentMethod.id;
  }

  // The buyer's bank asks for a confirmation (3-D Secure): Stripe.js shows
  // it; the simulator's completes by itself at `completes_at`.
  async function confirmWithBank(waiting) {
    if (stripe) {
      await stripe.handleNextAction({ clientSecret: waiting.client_secret });
      return;
    }
    const at = Date.parse((waiting.next_action || {}).completes_at || "");
    const wait = Number.isNaN(at) ? 1000 : Math.max(at - serverNow(), 250);
    await new Promise((resolve) => setTimeout(resolve, wait));
  }

  bind("pay", async () => {
    if (!hold) return;
    const paying = hold;
    let method;
    try {
      method = await paymentMethod();
    } catch (error) {
      say(error.message);
      return;
    }
    say("Paying…", "ok");
    const purchase = () =>
      api("POST", `/v1/holds/${paying.hold_id}/purchase`, { payment_method: method });
    let answer = await purchase();
    while (answer.ok && answer.status === 202) {
      // The hold lasts while the buyer confirms; the service says until when.
      setHold({ ...paying, expires_at: answer.data.expires_at });
      $("#hold").dataset.payment = "requires_action";
      say("Confirm the payment with your bank…", "ok");
      await confirmWithBank(answer.data);
      answer = await purchase();
    }
    delete $("#hold").dataset.payment;
    if (!answer.ok) {
      say(explain(answer.problem));
      if (["hold_expired", "hold_released", "hold_converted"].includes(answer.problem.code)) clearHold();
      if (answer.problem.reversed) clearHold();
      return;
    }
    const booked = answer.data;
    const box = $("#booking");
    box.hidden = false;
    box.dataset.bookingId = booked.booking_id;
    $("#booking-what").textContent = `${booked.pool_id ? `${booked.quantity} places in ${booked.pool_id}` : `Seats ${list(booked.seats)}`}, ${(booked.amount_cents / 100).toFixed(2)} paid. Booking ${booked.booking_id}.`;
    clearHold();
    say("Booked. Enjoy the show!", "ok");
  });

  function connected(live) {
    const status = $("#connection");
    status.dataset.connection = live ? "live" : "connecting";
    status.textContent = live ? "Live" : "Reconnecting…";
  }

  function listen() {
    // EventSource reconnects by itself, sending Last-Event-ID.
    const stream = new EventSource(`/v1/shows/${encodeURIComponent(showId)}/availability/stream`);
    stream.addEventListener("snapshot", (event) => {
      const snapshot = JSON.parse(event.data);
      for (const seat of snapshot.seats) setStatus(seat.seat_id, seat.status);
      for (const pool of snapshot.pools) setPool(pool);
      connected(true);
    });
    stream.addEventListener("change", (event) => {
      const change = JSON.parse(event.data);
      for (const seat of change.seats) setStatus(seat.seat_id, seat.status);
      for (const pool of change.pools) setPool(pool);
      connected(true);
    });
    stream.addEventListener("error", () => connected(false));
  }

  // The waiting room (docs/api.md, "Waiting room"): before admission the
  // page shows the buyer's place in the queue, live, instead of the map.
  // The stream needs the bearer token, which EventSource cannot send, so it
  // is read with fetch.
  let room = null; // the show's waiting_room, if it has one
  let following = null; // AbortController of the queue stream being read
  let shownView = null; // the standing shown
  let waitingSince = 0; // when its estimate was shown

  // The stream tells an estimate when it changes, not every second: the
  // page counts it down meanwhile.
  setInterval(() => {
    if (!shownView || shownView.status !== "waiting" || shownView.estimated_wait_seconds === null) return;
    const left = Math.max(0, shownView.estimated_wait_seconds - Math.floor((Date.now() - waitingSince) / 1000));
    $("#queue-detail").textContent = `About ${seconds(left)} to wait.`;
  }, 1000);

  function seconds(n) {
    if (n < 60) return `${n} s`;
    const m = Math.floor(n / 60);
    return m < 60 ? `${m} min ${n % 60} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
  }

  function showQueue(view) {
    shownView = view;
    const panel = $("#queue");
    panel.hidden = false;
    panel.dataset.queueStatus = view ? view.status : "";
    document.body.dataset.queue = view ? view.status : "none";
    const join = document.querySelector('[data-action="join"]');
    join.hidden = Boolean(view);
    const what = $("#queue-what");
    const detail = $("#queue-detail");
    if (!view) {
      what.textContent = `The sale opens ${new Date(room.sale_starts_at).toLocaleString()} through a waiting room.`;
      detail.textContent = "Join the queue: everyone who joins before the start gets a random place, so there is no need to hurry.";
      return;
    }
    panel.dataset.position = view.position;
    panel.dataset.ahead = view.ahead === null ? "" : view.ahead;
    switch (view.status) {
      case "waiting":
        what.textContent = `You are number ${view.position} in the queue, ${view.ahead} ahead of you.`;
        // No estimate yet: the place is drawn when the sale opens.
        waitingSince = Date.now();
        detail.textContent = view.estimated_wait_seconds === null
          ? `Places are drawn at random when the sale opens (${new Date(view.sale_starts_at).toLocaleTimeString()}).`
          : `About ${seconds(view.estimated_wait_seconds)} to wait.`;
        break;
      case "admitted":
        what.textContent = "It is your turn: choose your seats.";
        detail.textContent = `You may hold seats until ${new Date(view.admitted_until).toLocaleTimeString()}.`;
        panel.dataset.admittedUntil = view.admitted_until;
        break;
      case "expired":
        what.textContent = "Your turn has passed.";
        detail.textContent = "You were let in but did not hold seats in time.";
        break;
      case "closed":
        what.textContent = "Sold out.";
        detail.textContent = "Every seat has been sold.";
        break;
      default:
        what.textContent = view.status;
    }
  }

  async function followQueue() {
    if (following) following.abort();
    const token = tokenInput.value.trim();
    if (!room || !token) {
      showQueue(null);
      return;
    }
    const controller = new AbortController();
    following = controller;
    const path = `/v1/shows/${encodeURIComponent(showId)}/queue/me`;
    const mine = await api("GET", path);
    if (controller.signal.aborted) return;
    if (!mine.ok) {
      showQueue(null);
      if (mine.problem.code !== "queue_entry_not_found") say(explain(mine.problem));
      return;
    }
    showQueue(mine.data);
    let last = mine.data;
    while (!controller.signal.aborted && ["waiting", "admitted"].includes(last.status)) {
      try {
        const response = await fetch(`${path}/stream`, {
          headers: { Accept: "text/event-stream", Authorization: "Bearer " + token },
          signal: controller.signal,
        });
        if (!response.ok || !response.body) throw new Error(`stream ${response.status}`);
        connected(true);
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("");
            if (data) {
              last = JSON.parse(data);
              showQueue(last);
            }
          }
        }
      } catch (error) {
        if (controller.signal.aborted) return;
      }
      if (!["waiting", "admitted"].includes(last.status)) break;
      // The stream ended (an instance shut down, the network): again, soon.
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }

  bind("join", async () => {
    const answer = await api("POST", `/v1/shows/${encodeURIComponent(showId)}/queue`, {});
    if (!answer.ok) {
      say(explain(answer.problem));
      return;
    }
    say("You are in the queue. Keep this page open.", "ok");
    followQueue();
  });

  async function start() {
    const answer = await api("GET", `/v1/shows/${encodeURIComponent(showId)}`);
    if (!answer.ok) {
      say(answer.problem.code === "show_not_found" ? "There is no such show." : explain(answer.problem));
      return;
    }
    draw(answer.data);
    showSelection();
    room = answer.data.waiting_room || null;
    if (room) {
      followQueue();
      tokenInput.addEventListener("change", followQueue);
    }
    listen();
    setUpPayments();
    setInterval(tick, 250);
  }

  start();
})();
