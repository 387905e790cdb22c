// The seat map: the show's seats drawn from its definition, coloured live
// from the availability stream, and a buyer's hold, extension, payment and
// release through the public API. No framework, nothing fetched from
// elsewhere. The stable data-* attributes are part of the contract
// (docs/api.md, "Seat map").
//
// Two drawings: a show whose seats all have coordinates is drawn as its
// venue (the chart: stage, sections, seats at their positions, coloured by
// price category, zoom and pan); any other show as a grid of sections and
// rows. Both keep one map from seat id to element: a change repaints that
// element and nothing else.
(() => {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const SEAT = 20; // seat square, px
  const PITCH = 24; // distance between seats in a row
  const ROW_PITCH = 26;
  const LEFT = 34; // room for row labels
  const MAX_BEST = 10; // docs/api.md: best available, quantity 1..10
  const MIN_ZOOM = 0.5; // of the whole venue in the frame
  const MAX_ZOOM = 60;
  const ZOOM_STEP = 1.5; // a button press or a key

  const parts = location.pathname.split("/").filter(Boolean);
  const showId = decodeURIComponent(parts[parts.length - 1] || "");
  const $ = (selector) => document.querySelector(selector);

  const seats = new Map(); // seat_id -> { spec, el, status, and the grid's label, cross, title }
  const rows = []; // [[seat_id, ...], ...] per drawn row, for arrow keys
  const pools = new Map(); // pool_id -> { spec, el, count }
  const selected = new Set();
  const chosenType = new Map(); // seat_id -> ticket type, for a selected seat
  // The buyer's holds (a basket): several holds (seats, places) are paid
  // once, as one order (`POST /v1/orders`); one hold alone is purchased.
  let basket = [];
  const MAX_ORDER_HOLDS = 20; // the service's MAX_HOLDS_PER_ORDER
  let clockOffset = 0; // server time - local time, from the Date header
  let placed = false; // the show's seats have coordinates: drawn as its venue
  let chart = null; // the venue drawing's zoom and pan
  let tabStop = null; // the one seat in the tab order (roving tabindex)

  // What the show sells: ticket types (the first the default), categories
  // with their colour and prices, section labels, the currency.
  const catalog = {
    listed: false, // the show lists its ticket types: offer a choice per seat
    types: [{ ticket_type: "standard", label: "Standard" }],
    categories: new Map(), // category -> { label, color, prices: Map(type -> cents) }
    sections: new Map(), // section -> label
    currency: "EUR",
    format: null, // Intl.NumberFormat
    minor: 2, // digits of the minor unit
  };

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
        if (problem.holds && problem.voided) return "One of your holds ended before the payment went through; nothing was charged and nothing was booked.";
        if (problem.holds) return "One of your holds has expired; nothing was charged. Release it or choose again.";
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
      case "ticket_type_unavailable":
        return "That ticket type is not sold for one of the seats you chose. Choose another ticket type.";
      case "admission_required":
        return "This sale opens through a waiting room: join the queue, and choose seats once you are let in.";
      case "available_now":
        return "What you ask for is free right now: choose it on the map instead.";
      case "waitlist_entry_exists":
        return "You are on this show's waiting list already, for something else. Leave it first to ask again.";
      case "no_waitlist":
        return "This show keeps no waiting list.";
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
    return {
      available: "available", selected: "chosen by you", held: "held", booked: "booked",
      not_for_sale: "not for sale here",
    }[status];
  }

  function mine(seatId) {
    return basket.some((h) => (h.seats || []).includes(seatId));
  }

  // Money in the show's currency, from minor units.
  function money(cents) {
    const value = cents / 10 ** catalog.minor;
    if (catalog.format) return catalog.format.format(value);
    return `${value.toFixed(catalog.minor)} ${catalog.currency}`;
  }

  function learn(show) {
    catalog.currency = String(show.currency || "eur").toUpperCase();
    try {
      catalog.format = new Intl.NumberFormat(document.documentElement.lang || undefined, {
        style: "currency",
        currency: catalog.currency,
      });
      catalog.minor = catalog.format.resolvedOptions().maximumFractionDigits;
    } catch (error) {
      catalog.format = null;
    }
    if ((show.ticket_types || []).length) {
      catalog.listed = true;
      catalog.types = show.ticket_types;
    }
    for (const category of show.categories || []) {
      catalog.categories.set(category.category, { ...category, prices: new Map() });
    }
    for (const price of show.prices || []) {
      const category = catalog.categories.get(price.category);
      if (category) category.prices.set(price.ticket_type, price.price_cents);
    }
    for (const section of show.sections || []) catalog.sections.set(section.section, section.label);
  }

  function typeLabel(type) {
    const found = catalog.types.find((t) => t.ticket_type === type);
    return found ? found.label : type;
  }

  // A seat's price for a ticket type, or undefined when it is not sold so.
  function priceOf(spec, type) {
    const category = spec.category && catalog.categories.get(spec.category);
    if (category && category.prices.has(type)) return category.prices.get(type);
    if (!category && spec.price_cents != null && type === catalog.types[0].ticket_type) return spec.price_cents;
    return undefined;
  }

  // The prices of a seat in words: "€120.00" with one ticket type,
  // "Adult €120.00, Child €60.00" with several. Kept per category.
  const priceWordsCache = new Map();
  function priceWords(spec) {
    const key = spec.category ? `c:${spec.category}` : `p:${spec.price_cents}`;
    if (priceWordsCache.has(key)) return priceWordsCache.get(key);
    const priced = catalog.types
      .map((t) => [t, priceOf(spec, t.ticket_type)])
      .filter(([, cents]) => cents !== undefined);
    const text = priced.length === 1 && !catalog.listed
      ? money(priced[0][1])
      : priced.map(([t, cents]) => `${t.label} ${money(cents)}`).join(", ");
    priceWordsCache.set(key, text);
    return text;
  }

  function sectionName(section) {
    return catalog.sections.get(section) || section;
  }

  // What a screen reader says of a seat. The words of a section and of a
  // category are made once: 20,000 labels are built at the first draw.
  const sectionWordsCache = new Map();
  const categoryWordsCache = new Map();
  function seatWords(seatId, spec, shown) {
    const yours = mine(seatId) ? ", yours" : "";
    if (placed) {
      let section = sectionWordsCache.get(spec.section);
      if (section === undefined) {
        section = `Section ${sectionName(spec.section)}, row `;
        sectionWordsCache.set(spec.section, section);
      }
      let category = categoryWordsCache.get(spec.category);
      if (category === undefined) {
        const known = catalog.categories.get(spec.category);
        const price = priceWords(spec);
        category = `${known ? `, ${known.label}` : ""}${price ? `, ${price}` : ""}`;
        categoryWordsCache.set(spec.category, category);
      }
      return `${section}${spec.row}, seat ${spec.number}${category}${spec.accessible ? ", wheelchair space" : ""}: ${words(shown)}${yours}`;
    }
    const price = priceWords(spec);
    return `Seat ${seatId}, section ${spec.section}, row ${spec.row}, number ${spec.number}`
      + `${price ? `, ${price}` : ""}: ${words(shown)}${yours}`;
  }

  function paint(seatId) {
    const seat = seats.get(seatId);
    if (!seat) return;
    const shown = selected.has(seatId) && seat.status === "available" ? "selected" : seat.status;
    const el = seat.el;
    el.setAttribute("data-status", shown);
    el.setAttribute("data-mine", mine(seatId) ? "true" : "false");
    el.setAttribute("aria-checked", shown === "selected" ? "true" : "false");
    el.setAttribute("aria-disabled", shown === "available" || shown === "selected" ? "false" : "true");
    // Seats kept for a sales channel (the box office, a partner) are shown,
    // and the legend says what they are, only on a show that has some.
    if (shown === "not_for_sale") $("[data-legend='not_for_sale']").hidden = false;
    el.setAttribute("aria-label", seatWords(seatId, seat.spec, shown));
    if (seat.label) {
      seat.label.dataset.status = shown;
      seat.title.textContent = `${seatId}: ${words(shown)}${mine(seatId) ? ", yours" : ""}`;
      seat.cross.setAttribute("visibility", seat.status === "booked" ? "visible" : "hidden");
    }
    if (infoSeat === seatId) showSeatInfo(seatId);
  }

  function setStatus(seatId, status) {
    const seat = seats.get(seatId);
    if (!seat || seat.status === status) return;
    seat.status = status;
    if (selected.has(seatId) && status !== "available") {
      selected.delete(seatId);
      chosenType.delete(seatId);
      if (!mine(seatId)) say(`Seat ${seatId} was just taken by someone else.`);
      showSelection();
    }
    paint(seatId);
  }

  // The ticket type of a selected seat: the buyer's choice, else the default.
  function typeOf(seatId) {
    return chosenType.get(seatId) || catalog.types[0].ticket_type;
  }

  function showSelection() {
    const chosen = [...selected];
    let total = 0;
    let priced = chosen.length > 0;
    const described = chosen.map((seatId) => {
      const spec = seats.get(seatId).spec;
      const cents = priceOf(spec, typeOf(seatId));
      if (cents === undefined) priced = false;
      else total += cents;
      return catalog.listed && cents !== undefined
        ? `${seatId} (${typeLabel(typeOf(seatId))}, ${money(cents)})`
        : seatId;
    });
    $("#selection").textContent = chosen.length
      ? `Selected: ${described.join(", ")} (${chosen.length} seat${chosen.length > 1 ? "s" : ""}${priced ? `, ${money(total)}` : ""}).`
      : "No seat selected.";
    document.querySelector('[data-action="hold"]').disabled = chosen.length === 0 || basket.length >= MAX_ORDER_HOLDS;
    showChoosers(chosen);
  }

  // One ticket type chooser per selected seat (shows that list ticket
  // types): built again when the selection changes, not when a type does.
  function showChoosers(chosen) {
    const list = $("#chosen");
    const shown = [...list.querySelectorAll("select")].map((s) => s.dataset.ticketTypeFor);
    if (!catalog.listed || (shown.length === chosen.length && shown.every((id, i) => id === chosen[i]))) {
      list.hidden = !catalog.listed || chosen.length === 0;
      return;
    }
    const fragment = document.createDocumentFragment();
    for (const seatId of chosen) {
      const spec = seats.get(seatId).spec;
      const item = document.createElement("li");
      const label = document.createElement("label");
      const selectId = `type-${seatId}`;
      label.htmlFor = selectId;
      label.textContent = `Seat ${spec.number}, row ${spec.row}, section ${sectionName(spec.section)}`;
      const select = document.createElement("select");
      select.id = selectId;
      select.dataset.ticketTypeFor = seatId;
      for (const type of catalog.types) {
        const option = document.createElement("option");
        option.value = type.ticket_type;
        const cents = priceOf(spec, type.ticket_type);
        option.textContent = cents === undefined ? `${type.label} (not sold for this seat)` : `${type.label} ${money(cents)}`;
        option.disabled = cents === undefined;
        option.selected = type.ticket_type === typeOf(seatId);
        select.appendChild(option);
      }
      select.addEventListener("change", () => {
        chosenType.set(seatId, select.value);
        showSelection();
      });
      item.append(label, select);
      fragment.appendChild(item);
    }
    list.replaceChildren(fragment);
    list.hidden = chosen.length === 0;
  }

  function toggle(seatId) {
    const seat = seats.get(seatId);
    if (!seat) return;
    if (seat.status !== "available") {
      say(mine(seatId) ? `Seat ${seatId} is in your hold.` : `Seat ${seatId} is ${words(seat.status)}.`);
      return;
    }
    if (selected.has(seatId)) {
      selected.delete(seatId);
      chosenType.delete(seatId);
    } else selected.add(seatId);
    say("", "ok");
    paint(seatId);
    showSelection();
  }

  // Roving tabindex: one seat is in the tab order (the last one focused);
  // arrows move between seats.
  function makeTabStop(seatId) {
    const seat = seats.get(seatId);
    if (!seat || tabStop === seatId) return;
    const before = tabStop && seats.get(tabStop);
    if (before) before.el.setAttribute("tabindex", "-1");
    seat.el.setAttribute("tabindex", "0");
    tabStop = seatId;
  }

  function focusSeat(seatId) {
    const seat = seats.get(seatId);
    if (!seat) return;
    makeTabStop(seatId);
    seat.el.focus({ preventScroll: Boolean(chart) });
    if (chart) chart.reveal(seat.el);
  }

  // The seat last pointed at or focused, in words under the chart (kept
  // up to date as it changes).
  let infoSeat = null;
  function showSeatInfo(seatId) {
    const seat = seats.get(seatId);
    if (!seat || !chart) return;
    infoSeat = seatId;
    $("#seat-info").textContent = seat.el.getAttribute("aria-label");
  }

  // The grid: by section and row, in order.
  function gridTarget(seatId, key) {
    const r = rows.findIndex((row) => row.includes(seatId));
    if (r < 0) return null;
    const i = rows[r].indexOf(seatId);
    if (key === "ArrowLeft") return rows[r][i - 1];
    if (key === "ArrowRight") return rows[r][i + 1];
    if (key === "ArrowUp" && r > 0) return rows[r - 1][Math.min(i, rows[r - 1].length - 1)];
    if (key === "ArrowDown" && r + 1 < rows.length) return rows[r + 1][Math.min(i, rows[r + 1].length - 1)];
    if (key === "Home") return rows[r][0];
    if (key === "End") return rows[r][rows[r].length - 1];
    return null;
  }

  // The chart: the nearest seat in the arrow's direction, a seat straight
  // ahead preferred to one off to the side; Home and End: the row's ends.
  function chartTarget(seatId, key) {
    const from = seats.get(seatId).spec;
    if (key === "Home" || key === "End") {
      let best = null;
      for (const [id, seat] of seats) {
        const s = seat.spec;
        if (s.section !== from.section || s.row !== from.row) continue;
        if (!best || (key === "Home" ? s.x < best[1] : s.x > best[1])) best = [id, s.x];
      }
      return best && best[0];
    }
    const axis = {
      ArrowRight: [1, 0],
      ArrowLeft: [-1, 0],
      ArrowDown: [0, 1],
      ArrowUp: [0, -1],
    }[key];
    if (!axis) return null;
    const least = chart.radius * 0.5; // closer than this ahead: beside, not ahead
    let best = null;
    let bestScore = Infinity;
    for (const [id, seat] of seats) {
      const dx = seat.spec.x - from.x;
      const dy = seat.spec.y - from.y;
      const ahead = dx * axis[0] + dy * axis[1];
      if (ahead < least) continue;
      const aside = Math.abs(dx * axis[1] + dy * axis[0]);
      const score = ahead + 2.5 * aside;
      if (score < bestScore) {
        bestScore = score;
        best = id;
      }
    }
    return best;
  }

  function onSeatKey(event, seatId) {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      toggle(seatId);
      return true;
    }
    if ((event.key.startsWith("Arrow") && !event.shiftKey) || event.key === "Home" || event.key === "End") {
      event.preventDefault();
      const target = chart ? chartTarget(seatId, event.key) : gridTarget(seatId, event.key);
      if (target) focusSeat(target);
      return true;
    }
    return false;
  }

  function el(name, attributes, parent) {
    const node = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }

  // Tells the page (and the benchmark) that every seat is on screen: after
  // the frame that drew them (style, layout and paint done).
  function drawn() {
    requestAnimationFrame(() =>
      setTimeout(() => {
        const root = document.documentElement;
        root.dataset.seatsDrawn = String(seats.size);
        root.dataset.drawnAt = performance.now().toFixed(1);
      }, 0),
    );
  }

  function draw(show) {
    $("#show-name").textContent = show.name;
    document.title = `${show.name}: seat map`;
    $("#show-when").textContent = new Date(show.starts_at).toLocaleString();
    learn(show);
    const specs = show.seats || [];
    const bestSection = $("#best-section");
    for (const section of new Set(specs.map((s) => s.section))) {
      const option = document.createElement("option");
      option.value = section;
      option.textContent = sectionName(section);
      bestSection.appendChild(option);
    }
    placed = specs.length > 0 && specs.every((s) => Number.isFinite(s.x) && Number.isFinite(s.y));
    if (placed) drawChart(show);
    else drawGrid(specs);
    showPrices();
    drawPools(show.pools || []);
    if (specs.length) makeTabStop(specs[0].seat_id);
    drawn();
  }

  function drawGrid(specs) {
    const sections = new Map();
    for (const spec of specs) {
      if (!sections.has(spec.section)) sections.set(spec.section, new Map());
      const byRow = sections.get(spec.section);
      if (!byRow.has(spec.row)) byRow.set(spec.row, []);
      byRow.get(spec.row).push(spec);
    }
    const container = $("#sections");
    container.addEventListener("focusin", (event) => {
      const seat = event.target.closest("[data-seat-id]");
      if (seat) makeTabStop(seat.getAttribute("data-seat-id"));
    });
    for (const [section, byRow] of sections) {
      const block = document.createElement("div");
      block.className = "section";
      const heading = document.createElement("h2");
      heading.textContent = `Section ${sectionName(section)}`;
      block.appendChild(heading);
      const widest = Math.max(...[...byRow.values()].map((r) => r.length));
      const svg = el("svg", {
        class: "section-map",
        role: "group",
        "aria-label": `Section ${sectionName(section)}`,
        width: LEFT + widest * PITCH + 4,
        height: byRow.size * ROW_PITCH + 4,
      });
      let r = 0;
      for (const [row, specs] of byRow) {
        specs.sort((a, b) => a.number - b.number);
        const y = 2 + r * ROW_PITCH;
        el("text", { class: "row-label", x: 2, y: y + SEAT / 2 }, svg).textContent = row;
        const drawnRow = [];
        specs.forEach((spec, i) => {
          const x = LEFT + i * PITCH;
          const attributes = {
            class: "seat",
            x,
            y,
            width: SEAT,
            height: SEAT,
            rx: 3,
            tabindex: -1,
            role: "checkbox",
            "data-seat-id": spec.seat_id,
            "data-status": "available",
          };
          if (spec.category) attributes["data-category"] = spec.category;
          if (spec.accessible) attributes["data-accessible"] = "true";
          const rect = el("rect", attributes, svg);
          const title = el("title", {}, rect);
          const cross = el("path", {
            class: "cross",
            d: `M${x + 4} ${y + 4} L${x + SEAT - 4} ${y + SEAT - 4} M${x + SEAT - 4} ${y + 4} L${x + 4} ${y + SEAT - 4}`,
            visibility: "hidden",
          }, svg);
          const label = el("text", { class: "seat-label", x: x + SEAT / 2, y: y + SEAT / 2 }, svg);
          label.textContent = String(spec.number);
          rect.addEventListener("click", () => toggle(spec.seat_id));
          rect.addEventListener("keydown", (event) => onSeatKey(event, spec.seat_id));
          seats.set(spec.seat_id, { spec, el: rect, label, cross, title, status: "available" });
          drawnRow.push(spec.seat_id);
          paint(spec.seat_id);
        });
        rows.push(drawnRow);
        r += 1;
      }
      block.appendChild(svg);
      container.appendChild(block);
    }
  }

  // The legend of categories: each entry `data-category`, and in it one
  // price per ticket type (`data-ticket-type`, `data-price-cents`).
  function showPrices() {
    if (!catalog.categories.size) return;
    const list = $("#categories");
    for (const [id, category] of catalog.categories) {
      const item = document.createElement("li");
      item.dataset.category = id;
      const swatch = el("svg", { width: 18, height: 18, "aria-hidden": "true" }, item);
      el("rect", { x: 1, y: 1, width: 16, height: 16, rx: 8, fill: category.color, stroke: "#1b1b1b" }, swatch);
      const name = document.createElement("span");
      name.className = "category-name";
      name.textContent = category.label;
      item.appendChild(name);
      const prices = document.createElement("ul");
      prices.setAttribute("aria-label", `${category.label} prices`);
      for (const type of catalog.types) {
        const cents = category.prices.get(type.ticket_type);
        if (cents === undefined) continue;
        const price = document.createElement("li");
        price.dataset.category = id;
        price.dataset.ticketType = type.ticket_type;
        price.dataset.priceCents = String(cents);
        price.textContent = `${type.label} ${money(cents)}`;
        prices.appendChild(price);
      }
      item.appendChild(prices);
      list.appendChild(item);
    }
    $("#prices").hidden = false;
  }

  // A seat's radius on the chart: a little less than half the usual gap
  // between neighbours in a row.
  function seatRadius(specs, byRow) {
    const gaps = [];
    for (const row of byRow.values()) {
      for (let i = 1; i < row.length; i += 1) {
        const gap = Math.hypot(row[i].x - row[i - 1].x, row[i].y - row[i - 1].y);
        if (gap > 0) gaps.push(gap);
      }
    }
    if (gaps.length) {
      gaps.sort((a, b) => a - b);
      return gaps[Math.floor(gaps.length / 2)] * 0.42;
    }
    const xs = specs.map((s) => s.x);
    const ys = specs.map((s) => s.y);
    const extent = Math.max(Math.max(...xs) - Math.min(...xs), Math.max(...ys) - Math.min(...ys), 1);
    return extent / Math.sqrt(specs.length) / 3 || 5;
  }

  const MARKUP_SAFE = /^[^&<>"']*$/;
  function escapeMarkup(value) {
    const text = String(value);
    if (MARKUP_SAFE.test(text)) return text;
    return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  // The venue: markup built once as one string and parsed in one go (20,000
  // seats are 20,000 elements; creating them one by one, with a listener
  // each, is what the grid does and what takes seconds). Listeners are on
  // the chart, not the seats.
  function drawChart(show) {
    const specs = show.seats;
    const byRow = new Map(); // "section row" -> specs along the row
    for (const spec of specs) {
      const key = `${spec.section}\u0000${spec.row}`;
      if (!byRow.has(key)) byRow.set(key, []);
      byRow.get(key).push(spec);
    }
    for (const row of byRow.values()) row.sort((a, b) => a.number - b.number);
    const r = seatRadius(specs, byRow);
    // Bounds of everything drawn.
    let minX = Infinity;
    let minY = Infinity;
    let maxX = -Infinity;
    let maxY = -Infinity;
    const include = (x0, y0, x1, y1) => {
      minX = Math.min(minX, x0);
      minY = Math.min(minY, y0);
      maxX = Math.max(maxX, x1);
      maxY = Math.max(maxY, y1);
    };
    const bySection = new Map();
    for (const spec of specs) {
      include(spec.x - r, spec.y - r, spec.x + r, spec.y + r);
      if (!bySection.has(spec.section)) bySection.set(spec.section, []);
      bySection.get(spec.section).push(spec);
    }
    const parts = [];
    const stage = show.stage;
    if (stage) {
      include(stage.x, stage.y, stage.x + stage.width, stage.y + stage.height);
      const size = Math.min(stage.height * 0.5, (stage.width / Math.max(stage.label.length, 1)) * 1.4);
      parts.push(
        `<rect class="stage" x="${stage.x}" y="${stage.y}" width="${stage.width}" height="${stage.height}" rx="${Math.min(stage.height, stage.width) * 0.15}"/>`,
        `<text class="stage-label" aria-hidden="true" x="${stage.x + stage.width / 2}" y="${stage.y + stage.height / 2}" font-size="${size}">${escapeMarkup(stage.label)}</text>`,
      );
    }
    for (const pool of show.pools || []) {
      const area = pool.area;
      if (!area) continue;
      include(area.x, area.y, area.x + area.width, area.y + area.height);
      const name = pool.label || pool.pool_id;
      const size = Math.min(area.height * 0.45, (area.width / Math.max(name.length, 1)) * 1.4);
      parts.push(
        `<rect class="area" x="${area.x}" y="${area.y}" width="${area.width}" height="${area.height}"/>`,
        `<text class="area-label" aria-hidden="true" x="${area.x + area.width / 2}" y="${area.y + area.height / 2}" font-size="${size}">${escapeMarkup(name)}</text>`,
      );
    }
    // Section labels, above each section's seats.
    const labelSize = r * 1.8;
    for (const [section, members] of bySection) {
      let top = Infinity;
      let left = Infinity;
      let right = -Infinity;
      for (const s of members) {
        top = Math.min(top, s.y);
        left = Math.min(left, s.x);
        right = Math.max(right, s.x);
      }
      const y = top - r * 2;
      include(left, y - labelSize, right, y);
      parts.push(
        `<text class="section-label" aria-hidden="true" x="${(left + right) / 2}" y="${y}" font-size="${labelSize}">${escapeMarkup(sectionName(section))}</text>`,
      );
    }
    // The seats, a group per section; a wheelchair space is a square with
    // the wheelchair sign on it.
    const side = r * 1.8;
    for (const [section, members] of bySection) {
      parts.push(`<g role="group" aria-label="Section ${escapeMarkup(sectionName(section))}">`);
      for (const s of members) {
        // Not focusable until the roving tabindex reaches it (makeTabStop).
        const common = `class="seat" role="checkbox" aria-checked="false" data-status="available"`
          + ` data-seat-id="${escapeMarkup(s.seat_id)}"${s.category ? ` data-category="${escapeMarkup(s.category)}"` : ""}`
          + ` aria-label="${escapeMarkup(seatWords(s.seat_id, s, "available"))}"`;
        if (s.accessible) {
          parts.push(
            `<rect ${common} data-accessible="true" x="${s.x - side / 2}" y="${s.y - side / 2}" width="${side}" height="${side}" rx="${side * 0.12}"/>`,
            `<use class="wheelchair" href="#wheelchair" aria-hidden="true" x="${s.x - side * 0.42}" y="${s.y - side * 0.42}" width="${side * 0.84}" height="${side * 0.84}"/>`,
          );
        } else {
          parts.push(`<circle ${common} cx="${s.x}" cy="${s.y}" r="${r}"/>`);
        }
      }
      parts.push("</g>");
    }
    // A small venue is not blown up: the frame shows at least some 25
    // seats across and 12 rows down.
    const pad = r * 2;
    const grow = (least, extent) => Math.max(0, least - extent) / 2 + pad;
    const [padX, padY] = [grow(r * 60, maxX - minX), grow(r * 30, maxY - minY)];
    const box = [minX - padX, minY - padY, maxX - minX + 2 * padX, maxY - minY + 2 * padY];
    const svg = el("svg", {
      id: "chart",
      class: "chart",
      viewBox: box.join(" "),
      role: "group",
      "aria-label": `Seats of ${show.name}`,
      "aria-describedby": "map-help",
    });
    const viewport = el("g", { class: "viewport" }, svg);
    viewport.innerHTML = parts.join("");
    // Category colours, as rules (one per category, not a fill per seat).
    // CSSOM rules are not inline styles: the page's policy allows them.
    const sheet = document.querySelector("style").sheet;
    // Strokes in the chart's units, from the seats' size (a stroke that
    // keeps its width on screen whatever the zoom costs a third more to draw).
    const stroke = (name, width) =>
      sheet.insertRule(`.chart .seat${name} { stroke-width: ${width}px; }`, sheet.cssRules.length);
    stroke("", r * 0.12);
    stroke('[data-status="selected"], .chart .seat[data-mine="true"]', r * 0.3);
    stroke(":focus", r * 0.4);
    for (const [id, category] of catalog.categories) {
      if (!/^#[0-9a-fA-F]{3,8}$/.test(category.color)) continue;
      sheet.insertRule(
        `.chart .seat[data-category="${CSS.escape(id)}"][data-status="available"] { fill: ${category.color}; }`,
        sheet.cssRules.length,
      );
    }
    // Seat id -> element, walking the groups in the order they were written.
    let group = viewport.firstElementChild;
    for (const members of bySection.values()) {
      while (group && group.tagName !== "g") group = group.nextElementSibling;
      if (!group) break;
      let node = group.firstElementChild;
      for (const spec of members) {
        seats.set(spec.seat_id, { spec, el: node, status: "available" });
        node = node.nextElementSibling;
        if (spec.accessible) node = node && node.nextElementSibling; // its sign
      }
      group = group.nextElementSibling;
    }
    $("#sections").hidden = true;
    $("#venue").hidden = false;
    // The frame takes the venue's shape, within the CSS's bounds (set
    // through the CSSOM, which the page's policy allows).
    const frame = $("#frame");
    frame.style.aspectRatio = `${box[2]} / ${box[3]}`;
    frame.appendChild(svg);
    $("#available-words").textContent = "available (in the colour of its price category)";
    $("[data-legend='available'] svg").style.display = "none";
    $("[data-legend='accessible']").hidden = !specs.some((s) => s.accessible);
    $("#map-help").textContent =
      "Tab to the seats, arrows to move to the nearest seat that way, Home and End to a row's ends, Enter or Space to choose. "
      + "+ and - zoom, 0 shows the whole venue, Shift and an arrow pans; or the wheel, a drag, a pinch.";
    chart = new Chart(svg, viewport, box, r);
  }

  // Zoom and pan: a transform on the group of everything drawn (the
  // viewBox shows the whole venue), applied once per frame.
  class Chart {
    constructor(svg, viewport, box, radius) {
      this.svg = svg;
      this.viewport = viewport;
      this.box = box;
      this.radius = radius;
      this.k = 1;
      this.tx = 0;
      this.ty = 0;
      this.frame = 0;
      this.pointers = new Map(); // pointerId -> {x, y}
      this.drag = null;
      this.moved = false;
      this.listen();
    }

    // A point of the page in the viewBox's units.
    toBox(clientX, clientY) {
      const m = this.svg.getScreenCTM();
      if (!m) return { x: this.box[0] + this.box[2] / 2, y: this.box[1] + this.box[3] / 2 };
      return new DOMPoint(clientX, clientY).matrixTransform(m.inverse());
    }

    scale() {
      const m = this.svg.getScreenCTM();
      return m && m.a ? m.a : 1;
    }

    centre() {
      const rect = this.svg.getBoundingClientRect();
      return this.toBox(rect.left + rect.width / 2, rect.top + rect.height / 2);
    }

    zoomAt(point, factor) {
      const k = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, this.k * factor));
      const applied = k / this.k;
      this.tx = point.x - (point.x - this.tx) * applied;
      this.ty = point.y - (point.y - this.ty) * applied;
      this.k = k;
      this.apply();
    }

    panBy(dx, dy) {
      this.tx += dx;
      this.ty += dy;
      this.apply();
    }

    reset() {
      this.k = 1;
      this.tx = 0;
      this.ty = 0;
      this.apply();
    }

    // Some of the venue stays in view, whatever the pan.
    clamp() {
      const [x, y, w, h] = this.box;
      const k = this.k;
      this.tx = Math.min(x + 0.9 * w - k * x, Math.max(x + 0.1 * w - k * (x + w), this.tx));
      this.ty = Math.min(y + 0.9 * h - k * y, Math.max(y + 0.1 * h - k * (y + h), this.ty));
    }

    apply() {
      this.clamp();
      if (this.frame) return;
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.viewport.setAttribute("transform", `translate(${this.tx} ${this.ty}) scale(${this.k})`);
        $("#venue").dataset.zoom = this.k.toFixed(2);
      });
    }

    // Pans so that a seat moved to by keyboard is in view.
    reveal(node) {
      const frame = this.svg.getBoundingClientRect();
      const seat = node.getBoundingClientRect();
      const margin = 24;
      let dx = 0;
      let dy = 0;
      if (seat.left < frame.left + margin || seat.right > frame.right - margin) {
        dx = frame.left + frame.width / 2 - (seat.left + seat.width / 2);
      }
      if (seat.top < frame.top + margin || seat.bottom > frame.bottom - margin) {
        dy = frame.top + frame.height / 2 - (seat.top + seat.height / 2);
      }
      if (dx || dy) this.panBy(dx / this.scale(), dy / this.scale());
    }

    listen() {
      const svg = this.svg;
      const frame = $("#frame");
      svg.addEventListener("click", (event) => {
        if (this.moved) {
          this.moved = false;
          return;
        }
        const seat = event.target.closest("[data-seat-id]");
        if (!seat) return;
        // The keyboard goes on from the seat last chosen with the pointer.
        makeTabStop(seat.getAttribute("data-seat-id"));
        toggle(seat.getAttribute("data-seat-id"));
      });
      svg.addEventListener("focusin", (event) => {
        const seat = event.target.closest("[data-seat-id]");
        if (!seat) return;
        const id = seat.getAttribute("data-seat-id");
        makeTabStop(id);
        showSeatInfo(id);
      });
      svg.addEventListener("pointerover", (event) => {
        const seat = event.target.closest && event.target.closest("[data-seat-id]");
        if (seat) showSeatInfo(seat.getAttribute("data-seat-id"));
      });
      $("#venue").addEventListener("keydown", (event) => {
        const seat = event.target.closest && event.target.closest("[data-seat-id]");
        if (seat && onSeatKey(event, seat.getAttribute("data-seat-id"))) return;
        if (event.target.closest("select, input")) return;
        const step = 60 / this.scale();
        const keys = {
          "+": () => this.zoomAt(this.centre(), ZOOM_STEP),
          "=": () => this.zoomAt(this.centre(), ZOOM_STEP),
          "-": () => this.zoomAt(this.centre(), 1 / ZOOM_STEP),
          _: () => this.zoomAt(this.centre(), 1 / ZOOM_STEP),
          0: () => this.reset(),
          ArrowLeft: () => this.panBy(step, 0),
          ArrowRight: () => this.panBy(-step, 0),
          ArrowUp: () => this.panBy(0, step),
          ArrowDown: () => this.panBy(0, -step),
        };
        const action = keys[event.key];
        if (!action || (event.key.startsWith("Arrow") && !event.shiftKey)) return;
        if (event.ctrlKey || event.metaKey || event.altKey) return;
        event.preventDefault();
        action();
      });
      svg.addEventListener(
        "wheel",
        (event) => {
          event.preventDefault();
          const delta = event.deltaMode === 1 ? event.deltaY * 16 : event.deltaY;
          this.zoomAt(this.toBox(event.clientX, event.clientY), Math.exp(-delta * 0.002));
        },
        { passive: false },
      );
      // Drag to pan (a pointer that moves more than a few pixels: not a
      // click), two pointers to pinch.
      svg.addEventListener("pointerdown", (event) => {
        this.pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
        if (this.pointers.size === 1) {
          this.drag = { x: event.clientX, y: event.clientY, id: event.pointerId, started: false };
          this.moved = false;
        }
      });
      svg.addEventListener("pointermove", (event) => {
        const last = this.pointers.get(event.pointerId);
        if (!last) return;
        if (this.pointers.size >= 2) {
          const [a, b] = [...this.pointers.entries()];
          const other = a[0] === event.pointerId ? b[1] : a[1];
          const before = Math.hypot(last.x - other.x, last.y - other.y);
          const after = Math.hypot(event.clientX - other.x, event.clientY - other.y);
          const mid = { x: (event.clientX + other.x) / 2, y: (event.clientY + other.y) / 2 };
          const midBefore = { x: (last.x + other.x) / 2, y: (last.y + other.y) / 2 };
          this.panBy((mid.x - midBefore.x) / this.scale(), (mid.y - midBefore.y) / this.scale());
          if (before > 0) this.zoomAt(this.toBox(mid.x, mid.y), after / before);
          this.moved = true;
        } else if (this.drag && this.drag.id === event.pointerId) {
          if (!this.drag.started && Math.hypot(event.clientX - this.drag.x, event.clientY - this.drag.y) > 4) {
            this.drag.started = true;
            this.moved = true;
            svg.setPointerCapture(event.pointerId);
            frame.dataset.dragging = "true";
          }
          if (this.drag.started) this.panBy((event.clientX - last.x) / this.scale(), (event.clientY - last.y) / this.scale());
        }
        this.pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
      });
      const up = (event) => {
        this.pointers.delete(event.pointerId);
        if (this.drag && this.drag.id === event.pointerId) this.drag = null;
        delete frame.dataset.dragging;
      };
      svg.addEventListener("pointerup", up);
      svg.addEventListener("pointercancel", up);
      for (const [action, run] of [
        ["zoom-in", () => this.zoomAt(this.centre(), ZOOM_STEP)],
        ["zoom-out", () => this.zoomAt(this.centre(), 1 / ZOOM_STEP)],
        ["zoom-reset", () => this.reset()],
      ]) {
        document.querySelector(`[data-action="${action}"]`).addEventListener("click", run);
      }
    }
  }

  function drawPools(specs) {
    for (const spec of specs) {
      const block = document.createElement("div");
      block.className = "pool";
      block.dataset.poolId = spec.pool_id;
      block.dataset.available = String(spec.capacity);
      const name = document.createElement("span");
      const called = spec.label || spec.pool_id;
      name.textContent = spec.label || `Standing: ${spec.pool_id}`;
      const count = document.createElement("span");
      count.className = "count";
      const quantity = document.createElement("input");
      quantity.type = "number";
      quantity.min = "1";
      quantity.max = "20";
      quantity.value = "2";
      quantity.setAttribute("aria-label", `Places in ${called}`);
      block.append(name, count, quantity);
      // A show that lists ticket types: one for the places, priced.
      let type = null;
      if (catalog.listed) {
        type = document.createElement("select");
        type.setAttribute("aria-label", `Ticket type of the places in ${called}`);
        type.dataset.ticketTypeForPool = spec.pool_id;
        for (const t of catalog.types) {
          const cents = priceOf(spec, t.ticket_type);
          if (cents === undefined) continue;
          const option = document.createElement("option");
          option.value = t.ticket_type;
          option.textContent = `${t.label} ${money(cents)}`;
          type.appendChild(option);
        }
        block.appendChild(type);
      }
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.action = "hold-pool";
      button.textContent = "Hold places";
      button.addEventListener("click", () => {
        const body = { pool_id: spec.pool_id, quantity: Number(quantity.value) };
        if (type && type.value && type.value !== catalog.types[0].ticket_type) body.ticket_type = type.value;
        placeHold(body);
      });
      block.appendChild(button);
      // Sold out on a show with a waiting list: join it for these places.
      const join = document.createElement("button");
      join.type = "button";
      join.dataset.action = "waitlist-join-pool";
      join.hidden = true;
      join.textContent = `Join the waiting list for ${called}`;
      join.addEventListener("click", () =>
        joinLine({ pool_id: spec.pool_id, quantity: Math.min(MAX_WAITLIST_QUANTITY, Number(quantity.value)) }));
      block.appendChild(join);
      $("#pools").appendChild(block);
      pools.set(spec.pool_id, { spec, el: block, count, join, available: spec.capacity });
      setPool({ pool_id: spec.pool_id, capacity: spec.capacity, available: spec.capacity, held: 0, sold: 0 });
    }
  }

  function setPool(figures) {
    const pool = pools.get(figures.pool_id);
    if (!pool) return;
    pool.el.dataset.available = String(figures.available);
    pool.available = figures.available;
    showPoolJoins();
    pool.count.textContent = `${figures.available} of ${figures.capacity} places available (${figures.held} held, ${figures.sold} sold)`;
  }

  // What a hold's item is, in words: "A-1-2 (Premium, Child, €60.00)".
  function itemWords(item) {
    const category = item.category && catalog.categories.get(item.category);
    const pool = item.pool_id && pools.get(item.pool_id);
    const what = item.pool_id
      ? `${item.quantity} place${item.quantity > 1 ? "s" : ""} in ${(pool && pool.spec.label) || item.pool_id}`
      : item.seat_id;
    const details = [category ? category.label : null, catalog.listed ? typeLabel(item.ticket_type) : null]
      .filter(Boolean);
    const each = item.pool_id && item.quantity > 1 ? " each" : "";
    return `${what} (${details.length ? `${details.join(", ")}, ` : ""}${money(item.price_cents)}${each})`;
  }

  // Adds a hold to the basket, or brings one up to date (an answer without
  // the prices, an extension's, keeps the hold's).
  function setHold(next) {
    const known = basket.find((h) => h.hold_id === next.hold_id);
    const kept = known && next.items === undefined
      ? { ...next, items: known.items, amount_cents: known.amount_cents }
      : next;
    basket = known ? basket.map((h) => (h.hold_id === next.hold_id ? kept : h)) : [...basket, kept];
    showBasket([...(known ? known.seats || [] : []), ...(kept.seats || [])]);
  }

  // Takes holds out of the basket (all of them: no argument).
  function clearHold(holdIds) {
    const leaving = holdIds ? basket.filter((h) => holdIds.includes(h.hold_id)) : basket;
    basket = holdIds ? basket.filter((h) => !holdIds.includes(h.hold_id)) : [];
    showBasket(leaving.flatMap((h) => h.seats || []));
  }

  function holdWords(h) {
    const items = h.items || [];
    if (items.length) return `${h.pool_id ? "" : "Seats "}${items.map(itemWords).join(", ")}`;
    return h.pool_id ? `${h.quantity} place${h.quantity > 1 ? "s" : ""} in ${h.pool_id}` : `Seats ${list(h.seats)}`;
  }

  // The basket as the page shows it: each hold's items, the sum to pay,
  // and the earliest expiry (the countdown). `repaint`: seats that changed.
  function showBasket(repaint) {
    const box = $("#hold");
    box.hidden = basket.length === 0;
    const what = $("#hold-what");
    what.replaceChildren(
      ...basket.map((h) => {
        const line = document.createElement("li");
        line.dataset.holdId = h.hold_id;
        line.textContent = holdWords(h);
        return line;
      }),
    );
    const amount = $("#hold-amount");
    const priced = basket.length > 0 && basket.every((h) => Number.isFinite(h.amount_cents));
    if (basket.length === 0) {
      for (const key of ["holdId", "holdIds", "expiresAt", "amountCents"]) delete box.dataset[key];
    } else {
      const earliest = basket.reduce((a, h) => (Date.parse(h.expires_at) < Date.parse(a.expires_at) ? h : a));
      box.dataset.holdId = basket[basket.length - 1].hold_id;
      box.dataset.holdIds = basket.map((h) => h.hold_id).join(",");
      box.dataset.expiresAt = earliest.expires_at;
      $("#hold-until").textContent = `until ${new Date(earliest.expires_at).toLocaleTimeString()}`;
      $("#hold-title").textContent = basket.length > 1 ? `Your ${basket.length} holds, paid together` : "Your hold";
    }
    if (priced) {
      const total = basket.reduce((sum, h) => sum + h.amount_cents, 0);
      box.dataset.amountCents = String(total);
      amount.textContent = `To pay: ${money(total)}`;
      amount.hidden = false;
    } else {
      delete box.dataset.amountCents;
      amount.hidden = true;
    }
    for (const seatId of repaint || []) paint(seatId);
    tick();
    showSelection();
  }

  function tick() {
    if (basket.length === 0) return;
    const now = serverNow();
    const ended = basket.filter((h) => Date.parse(h.expires_at) <= now).map((h) => h.hold_id);
    if (ended.length) {
      clearHold(ended);
      say(basket.length ? "One of your holds expired; the others are still yours." : "Your hold expired. Choose seats again.");
      if (basket.length === 0) {
        $("#countdown").textContent = "0:00";
        return;
      }
    }
    const left = Math.min(...basket.map((h) => Date.parse(h.expires_at))) - now;
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
    if (basket.length >= MAX_ORDER_HOLDS) {
      say(`Pay for your ${MAX_ORDER_HOLDS} holds first: one payment takes at most that many.`);
      return;
    }
    const answer = await api("POST", `/v1/shows/${encodeURIComponent(showId)}/holds`, body, crypto.randomUUID());
    if (!answer.ok) {
      say(explain(answer.problem));
      if (answer.problem.code === "admission_required") followQueue();
      return;
    }
    selected.clear();
    chosenType.clear();
    setHold(answer.data);
    say(basket.length > 1 ? "Added. Pay for everything at once before the countdown ends." : "Held. Pay before the countdown ends.", "ok");
  }

  function bind(action, handler) {
    const button = document.querySelector(`[data-action="${action}"]`);
    button.addEventListener("click", () => busy(button, handler));
  }

  // A seat of the default ticket type goes as its id, another as
  // `{seat_id, ticket_type}`.
  bind("hold", () =>
    placeHold({
      seats: [...selected].map((seatId) =>
        typeOf(seatId) === catalog.types[0].ticket_type ? seatId : { seat_id: seatId, ticket_type: typeOf(seatId) },
      ),
    }),
  );
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
    for (const h of [...basket]) {
      const answer = await api("POST", `/v1/holds/${h.hold_id}/extend`, {});
      if (!answer.ok) {
        say(explain(answer.problem));
        if (["hold_expired", "hold_released", "hold_converted"].includes(answer.problem.code)) clearHold([h.hold_id]);
        return;
      }
      setHold(answer.data);
    }
    say(basket.length > 1 ? "More time: your holds now last longer." : "More time: your hold now lasts longer.", "ok");
  });
  bind("release", async () => {
    for (const h of [...basket]) {
      const answer = await api("DELETE", `/v1/holds/${h.hold_id}`);
      if (!answer.ok) {
        say(explain(answer.problem));
        return;
      }
      clearHold([h.hold_id]);
    }
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

  // One hold is purchased; several are one order, paid once (one 3-D
  // Secure step for all of them).
  bind("pay", async () => {
    if (basket.length === 0) return;
    const paying = [...basket];
    let method;
    try {
      method = await paymentMethod();
    } catch (error) {
      say(error.message);
      return;
    }
    say("Paying…", "ok");
    const pay = () =>
      paying.length === 1
        ? api("POST", `/v1/holds/${paying[0].hold_id}/purchase`, { payment_method: method })
        : api("POST", "/v1/orders", { holds: paying.map((h) => h.hold_id), payment_method: method });
    let answer = await pay();
    while (answer.ok && answer.status === 202) {
      // The holds last while the buyer confirms; the service says until when.
      for (const h of paying) setHold({ ...h, expires_at: answer.data.expires_at });
      $("#hold").dataset.payment = "requires_action";
      say("Confirm the payment with your bank…", "ok");
      await confirmWithBank(answer.data);
      answer = await pay();
    }
    delete $("#hold").dataset.payment;
    if (!answer.ok) {
      say(explain(answer.problem));
      const lost = answer.problem.holds || paying.map((h) => h.hold_id);
      if (["hold_expired", "hold_released", "hold_converted"].includes(answer.problem.code)) clearHold(lost);
      if (answer.problem.reversed) clearHold(paying.map((h) => h.hold_id));
      return;
    }
    const paid = answer.data;
    const box = $("#booking");
    box.hidden = false;
    if (paid.order_id) {
      delete box.dataset.bookingId;
      box.dataset.orderId = paid.order_id;
      const lines = paid.lines || [];
      $("#booking-what").textContent = `${lines.length} ticket${lines.length === 1 ? "" : "s"}, ${money(paid.amount_cents)} paid at once. Order ${paid.order_id}.`;
    } else {
      delete box.dataset.orderId;
      box.dataset.bookingId = paid.booking_id;
      $("#booking-what").textContent = `${paid.pool_id ? `${paid.quantity} places in ${paid.pool_id}` : `Seats ${list(paid.seats)}`}, ${money(paid.amount_cents)} paid. Booking ${paid.booking_id}.`;
    }
    clearHold(paying.map((h) => h.hold_id));
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
      const root = document.documentElement;
      if (!root.dataset.liveAt) root.dataset.liveAt = performance.now().toFixed(1);
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

  // The waiting list (docs/api.md, "Waiting list"): when nothing is free,
  // a buyer joins; seats that come back are offered in turn, as a hold in
  // the buyer's name, which lands in the basket to pay for.
  let line = null; // the show's waitlist settings, if it keeps one
  const MAX_WAITLIST_QUANTITY = 10; // what one entry may ask for (domain::limits)
  let entry = null; // the buyer's entry, as last read
  let lineRead = 0; // when it was last read (ms)
  const LINE_EVERY_MS = 2000; // how often the buyer's entry is read again
  const LINE_TICK_MS = 500; // how often the panel is looked at (sold out yet?)

  function soldOut() {
    for (const seat of seats.values()) if (seat.status === "available") return false;
    return seats.size > 0;
  }

  // A sold-out pool offers its own join while the buyer has no entry.
  function showPoolJoins() {
    const waiting = entry && entry.status !== "left" && entry.status !== "lapsed";
    for (const pool of pools.values()) {
      pool.join.hidden = !line || Boolean(waiting) || pool.available > 0;
      pool.el.dataset.waitlistJoin = String(!pool.join.hidden);
    }
  }

  // What an entry waits for, in words: "2 seats", "3 places in Floor".
  function asked(e, quantity) {
    const pool = e.pool_id && pools.get(e.pool_id);
    const name = pool ? pool.spec.label || pool.spec.pool_id : e.pool_id;
    return e.pool_id
      ? `${quantity} place${quantity > 1 ? "s" : ""} in ${name}`
      : `${quantity} seat${quantity > 1 ? "s" : ""}`;
  }

  function showLine() {
    showPoolJoins();
    const panel = $("#waitlist");
    const status = entry ? entry.status : "";
    panel.hidden = !line || (!entry && !soldOut());
    panel.dataset.waitlistOpen = String(!panel.hidden);
    panel.dataset.waitlistStatus = status;
    $("#waitlist-join").hidden = Boolean(entry) && status !== "left" && status !== "lapsed";
    document.querySelector('[data-action="waitlist-leave"]').hidden = status !== "waiting";
    const what = $("#waitlist-what");
    switch (status) {
      case "waiting":
        what.textContent = `You are number ${entry.position} on the waiting list for ${asked(entry, entry.quantity)}. What comes back is offered in turn.`;
        break;
      case "offered": {
        const offered = entry.places ? asked(entry, entry.places) : list(entry.seats);
        what.textContent = `Tickets came back for you: ${offered}, held in your name until ${new Date(entry.expires_at).toLocaleTimeString()}. Pay below.`;
        break;
      }
      case "booked":
        what.textContent = "You booked what the waiting list offered you.";
        break;
      case "lapsed":
        what.textContent = "What was offered to you was not bought in time and went to the next in line.";
        break;
      default:
        what.textContent = "Sold out. Join the waiting list: seats that come back are offered in turn, before anyone else can take them.";
    }
  }

  async function followLine(force) {
    if (!line || !tokenInput.value.trim()) return showLine();
    if (!force && Date.now() - lineRead < LINE_EVERY_MS) return showLine();
    lineRead = Date.now();
    const mine = await api("GET", `/v1/shows/${encodeURIComponent(showId)}/waitlist/me`);
    const before = entry;
    entry = mine.ok ? mine.data : null;
    if (entry && entry.status === "offered" && !(before && before.status === "offered")) {
      const hold = await api("GET", `/v1/holds/${entry.hold_id}`);
      if (hold.ok) {
        setHold(hold.data);
        say("Tickets came back for you from the waiting list. Pay before the countdown ends.", "ok");
      }
    }
    showLine();
  }

  async function joinLine(body) {
    const answer = await api("POST", `/v1/shows/${encodeURIComponent(showId)}/waitlist`, body);
    if (!answer.ok) return say(explain(answer.problem));
    entry = answer.data;
    say("You are on the waiting list. Keep this page open: an offer lands in your basket.", "ok");
    showLine();
  }

  bind("waitlist-join", () => {
    const quantity = Number($("#waitlist-quantity").value);
    return joinLine({ quantity, adjacent: $("#waitlist-adjacent").checked && quantity > 1 });
  });

  bind("waitlist-leave", async () => {
    if (!entry) return;
    const answer = await api("DELETE", `/v1/waitlist/${encodeURIComponent(entry.entry_id)}`);
    if (!answer.ok) return say(explain(answer.problem));
    entry = null;
    say("You left the waiting list.", "ok");
    showLine();
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
    line = answer.data.waitlist || null;
    if (line) {
      tokenInput.addEventListener("change", () => followLine(true));
      setInterval(() => followLine(false), LINE_TICK_MS);
    }
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
