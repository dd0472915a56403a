/** Rendered tiles kept, at most this many bytes (the benches fetch the same thousands of tiles round after round). */
const CACHE_BYTES = 256 * 1024 * 1024;

/**
 * Each tile is rendered once per drawing and kept, least recently served dropped first. A tile asked for
 * again while it renders shares that render.
 */
export class TileCache {
  private readonly tiles = new Map<string, Promise<Buffer>>();
  private readonly sizes = new Map<string, number>();
  private bytes = 0;

  /** After a redraw no request names the old drawing's tiles again. */
  clear(): void {
    this.tiles.clear();
    this.sizes.clear();
    this.bytes = 0;
  }

  get(key: string, render: () => Promise<Buffer>): Promise<Buffer> {
    const hit = this.tiles.get(key);
    if (hit) {
      // Most recently used last, in the Map's order.
      this.tiles.delete(key);
      this.tiles.set(key, hit);
      return hit;
    }
    const p = render();
    this.tiles.set(key, p);
    p.then(
      (png) => {
        if (this.tiles.get(key) !== p) return;
        this.sizes.set(key, png.length);
        this.bytes += png.length;
        this.evict();
      },
      () => this.tiles.delete(key),
    );
    return p;
  }

  private evict(): void {
    for (const key of this.tiles.keys()) {
      if (this.bytes <= CACHE_BYTES) return;
      const size = this.sizes.get(key);
      if (size === undefined) continue; // still rendering
      this.tiles.delete(key);
      this.sizes.delete(key);
      this.bytes -= size;
    }
  }
}
