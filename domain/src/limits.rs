//! Every limit of the product, in one place, each with the reason it exists.
//!
//! A limit bounds the work one request can cause, so that one client cannot
//! make an onsale slow for everybody else. The HTTP edge enforces the body
//! sizes; the rest are checked where the value is parsed.

/// Seats in one hold. An all-or-nothing hold appends to every seat stream in
/// one transaction; 50 bounds that transaction and the lock set it takes,
/// and is more than any real party books at once.
pub const MAX_SEATS_PER_HOLD: usize = 50;
/// Seats one allocation (or release) moves at most: a partner's block of a
/// stadium in one request, one append of one event a seat (far below
/// MAX_EVENTS_PER_BATCH), and a body of about 20 bytes a seat id
/// (MAX_ALLOCATION_BODY_BYTES).
pub const MAX_SEATS_PER_ALLOCATION: usize = 20_000;
/// A box-office clerk's note on a sale: a line or two ("paid by the
/// promoter's card", "wheelchair companion"), kept in the order's event.
pub const MAX_NOTE_CHARS: usize = 500;

/// Places in one general-admission hold (quantity 1..=20): a hold is for one
/// party, and the cap keeps one buyer from draining a pool in one request.
pub const MAX_POOL_HOLD_QUANTITY: u32 = 20;

/// Seats in one show: a stadium. Availability answers a whole show in one
/// response, so this also bounds that response.
pub const MAX_SEATS_PER_SHOW: usize = 100_000;

/// General-admission pools in one show.
pub const MAX_POOLS_PER_SHOW: usize = 100;
/// Sales channels of one show at most: a box office, partners, sponsors.
/// Every availability view of a channel is kept per channel, so the bound
/// keeps an instance's kept answers of a show bounded too.
pub const MAX_CHANNELS_PER_SHOW: usize = 32;

/// Places in one pool: a large festival day. Bounds shard arithmetic.
pub const MAX_POOL_CAPACITY: u32 = 1_000_000;

/// Show names, sections and rows: characters, not bytes.
pub const MAX_TEXT_CHARS: usize = 200;

/// Price of a seat or pool place, in cents (100,000.00 in any currency).
/// Sums of 50 such prices stay far inside an i64.
pub const MAX_PRICE_CENTS: i64 = 10_000_000;

/// How long a hold may last, in seconds: at least one second, at most two
/// hours. Longer holds would keep inventory away from other buyers for
/// longer than any checkout needs.
pub const MIN_HOLD_TTL_SECONDS: u32 = 1;
pub const MAX_HOLD_TTL_SECONDS: u32 = 7_200;

/// Idempotency keys are kept at least 24 hours: the API contract
/// (docs/api.md), so the retention setting cannot go below it.
pub const MIN_IDEMPOTENCY_RETENTION_HOURS: u64 = 24;
/// At most 30 days: clients retry within minutes, and every hour more is
/// one more hour of every buyer's keys in the table.
pub const MAX_IDEMPOTENCY_RETENTION_HOURS: u64 = 720;

/// `[A-Za-z0-9_-]{1,64}`.
pub const MAX_SHOW_ID_CHARS: usize = 64;

/// `[A-Za-z0-9_.:-]{1,32}`, also for pool ids.
pub const MAX_SEAT_ID_CHARS: usize = 32;

/// The `sub` claim of a token.
pub const MAX_BUYER_ID_CHARS: usize = 64;

/// `Idempotency-Key`: 1..=255 printable ASCII characters.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 255;

/// Seat numbers: positive and below this bound (no venue has a row of a million).
pub const MAX_SEAT_NUMBER: u32 = 1_000_000;

/// Default places per pool shard. A shard is one stream: every hold on it is
/// appended in turn, so a hot pool needs several; but a hold that does not
/// fit in one shard spans several streams, so shards must stay large enough
/// for most parties (20 places) to fit in one.
pub const PLACES_PER_SHARD: u32 = 64;

/// Shards per pool at most (default or configured). Answering `sold_out`
/// looks at every shard, so this bounds that work too.
pub const MAX_POOL_SHARDS: u32 = 32;

/// Seats and pool places one buyer may have held or booked on one show, when
/// the show sets `max_seats_per_buyer` (1..=1000; absent means no limit).
/// The bound is the largest limit a show may set: 1000 covers any group
/// booking, and it keeps a buyer's allowance stream (one entry per hold) and
/// its count small.
pub const MIN_SEATS_PER_BUYER: u32 = 1;
pub const MAX_SEATS_PER_BUYER: u32 = 1_000;

/// Seats one best-available request asks the service to choose (1..=10).
/// Choosing slides a window of this size along every row, and the chosen
/// block is held in one all-or-nothing append; ten seats side by side is
/// more than any party sits together, and larger parties choose seats.
pub const MIN_BEST_AVAILABLE_QUANTITY: usize = 1;
pub const MAX_BEST_AVAILABLE_QUANTITY: usize = 10;

/// A seat's `rank` in a show definition (lower is better for best
/// available): 0..=MAX_SEAT_RANK. A billion leaves room for any venue's
/// scheme (section * 1e6 + row * 1e3 + seat, say), and the sum of ten ranks
/// stays far inside an i64.
pub const MAX_SEAT_RANK: i64 = 1_000_000_000;

/// How long a hold may last in total, extensions included, in seconds from
/// the moment it was placed: two hours, the same as the longest hold TTL.
/// Extending must not become a way to keep inventory from other buyers
/// longer than any checkout needs.
pub const MAX_HOLD_SECONDS_CAP: u32 = 7_200;
/// The least `max_hold_seconds` a show may set (it must also be at least
/// the show's `hold_ttl_seconds`: a hold is never placed past its cap).
pub const MIN_MAX_HOLD_SECONDS: u32 = 1;
/// A show without `max_hold_seconds` lets a hold last this many TTLs in all
/// (then capped at `MAX_HOLD_SECONDS_CAP`).
pub const DEFAULT_MAX_HOLD_TTLS: u32 = 3;

/// Price categories of a venue or show. A legend a buyer can read lists a
/// handful; a hundred leaves room for an arena priced block by block.
pub const MAX_CATEGORIES: usize = 100;

/// Ticket types of a show (adult, child, student, ...). Each selected seat
/// offers them in a chooser on a phone: a score is already a long list.
pub const MAX_TICKET_TYPES: usize = 20;

/// Price changes of one show. Each is kept in memory with the show and read
/// at every hold's decision (the table in force at its `now`); an onsale
/// changes prices a few times (early bird, regular, at the door).
pub const MAX_PRICE_CHANGES: usize = 100;

/// How far from the origin a coordinate of a venue's chart may lie, either
/// way: a chart is drawn in one plane, and a number beyond this is a unit
/// mistake (millimetres for metres), not a venue.
pub const MAX_COORDINATE: f64 = 1_000_000.0;

/// Sections a chart lists. Each is a label on the seat map and a filter of
/// availability; an arena has tens, a stadium a few hundred.
pub const MAX_SECTIONS: usize = 1_000;

/// Holds one order may pay for (API.md: 1..20). An order's holds are
/// converted one append each, under the order's lock: twenty keeps an
/// order's conversion within a second even at the slowest append measured.
pub const MAX_HOLDS_PER_ORDER: usize = 20;

/// Lines one order may have: twenty holds of at most fifty seats each.
pub const MAX_LINES_PER_ORDER: usize = MAX_HOLDS_PER_ORDER * MAX_SEATS_PER_HOLD;

/// How long a waiting list's offer lasts (`waitlist.offer_seconds`):
/// a minute at least (a buyer must be told and reach the checkout), a day
/// at most (a returned seat must not sit unsold through a whole onsale).
pub const MIN_OFFER_SECONDS: u32 = 60;
pub const MAX_OFFER_SECONDS: u32 = 86_400;

/// Units one waiting-list entry asks for: as many as best available
/// chooses side by side (a party), and the offer is one hold.
pub const MAX_WAITLIST_QUANTITY: u32 = 10;

/// Entries one show's waiting list takes (every entry ever joined counts,
/// left ones too): the list is one stream, kept in memory and folded to
/// answer each buyer's place, so its length is bounded; a hundred
/// thousand is more buyers than any sold-out show has seats to return.
pub const MAX_WAITLIST_ENTRIES: usize = 100_000;

/// A scanner's nonce: long enough for a device id and a counter or a UUID.
pub const MAX_SCAN_NONCE_CHARS: usize = 64;

/// Scans in one offline upload: a scanner's shift at a busy gate in a few
/// requests, small enough for one append of bounded size.
pub const MAX_SCANS_PER_BATCH: usize = 1_000;

/// A ticket holder's name, as printed on the ticket.
pub const MAX_HOLDER_NAME_CHARS: usize = 100;

/// Gates of one show's door.
pub const MAX_GATES_PER_SHOW: usize = 100;

/// Scans one ticket keeps: a ticket scanned in and out all day long stays
/// a small stream; a scan past it is refused (`scan_limit`) and recorded
/// nowhere but the door's refusal log.
pub const MAX_SCANS_PER_TICKET: usize = 1_000;
