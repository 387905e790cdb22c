//! Tickets at the door: the codes a scanner reads, signed so that any
//! scanner verifies them offline with the public key alone (`code`), the
//! keys they are signed with (`keys`), and the code drawn as a QR code
//! (`qr`). What a ticket is, and what it may do, is the domain's Ticket
//! stream (`domain::ticket`).

pub mod code;
pub mod keys;
pub mod qr;
