// A ticket's page: the ticket read with the holder's token (after
// `#token=`, never sent to the server in the address), its QR code fetched
// with the same token and shown from a blob: address, and what the door
// will check (seat or area, ticket type, holder name). Printable.
(() => {
  "use strict";
  const ticketId = decodeURIComponent(location.pathname.split("/")[2] || "");
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const $ = (id) => document.getElementById(id);

  function status(state, text) {
    document.body.dataset.ticket = state;
    $("ticket-status").textContent = text;
  }

  async function get(path) {
    const response = await fetch(path, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      cache: "no-store",
    });
    return response;
  }

  function fact(term, value) {
    if (value === null || value === undefined || value === "") return;
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = String(value);
    $("ticket-facts").append(dt, dd);
  }

  async function show() {
    let response;
    try {
      response = await get(`/v1/tickets/${encodeURIComponent(ticketId)}`);
    } catch {
      return status("error", "No network: this page needs it once to show the ticket.");
    }
    if (response.status === 401) return status("error", "Open this page from your ticket link (it carries your token).");
    if (response.status === 403 || response.status === 404) return status("error", "No such ticket for this account.");
    if (!response.ok) return status("error", `The ticket could not be read (${response.status}); try again.`);
    const ticket = await response.json();
    const showResponse = await get(`/v1/shows/${encodeURIComponent(ticket.show_id)}`).catch(() => null);
    const showInfo = showResponse && showResponse.ok ? await showResponse.json() : {};
    $("ticket-show").textContent = showInfo.name || ticket.show_id;
    document.title = `Ticket: ${showInfo.name || ticket.show_id}`;
    if (showInfo.starts_at) {
      $("ticket-when").textContent = new Date(showInfo.starts_at).toLocaleString(undefined, {
        dateStyle: "full", timeStyle: "short",
      });
    }
    if (ticket.seat_id) {
      fact("Section", ticket.section);
      fact("Row", ticket.row);
      fact("Seat", ticket.number ?? ticket.seat_id);
    } else {
      fact("Area", ticket.pool_id);
    }
    const type = (showInfo.ticket_types || []).find((t) => t.ticket_type === ticket.ticket_type);
    fact("Ticket type", type?.label || ticket.ticket_type);
    fact("Name", ticket.holder_name);
    fact("Ticket", ticket.ticket_id);
    if (ticket.status !== "valid") {
      return status("revoked", "This ticket is no longer valid (cancelled, or transferred to someone else).");
    }
    status("valid", ticket.checked_in?.inside ? "Valid · checked in" : "Valid");
    $("ticket-code").textContent = ticket.code;
    $("ticket-code-box").hidden = false;
    const qr = await get(`/v1/tickets/${encodeURIComponent(ticketId)}/qr.svg`).catch(() => null);
    if (qr && qr.ok) {
      const image = $("ticket-qr");
      image.src = URL.createObjectURL(await qr.blob());
      image.alt = `QR code of ticket ${ticket.ticket_id}, version ${ticket.version}`;
      $("ticket-figure").hidden = false;
    }
    $("ticket-print").hidden = false;
  }

  $("ticket-print").addEventListener("click", () => window.print());
  show().finally(() => { document.body.dataset.ready = "true"; });
})();
