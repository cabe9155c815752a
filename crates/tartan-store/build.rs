// The migrations are embedded at compile time (`sqlx::migrate!`): rebuild
// when one is added or changed, which cargo does not notice by itself.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
