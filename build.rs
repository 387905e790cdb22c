// `sqlx::migrate!` embeds the migration files at compile time; without this
// a new migration file would not be picked up until some source file changed.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
