/**
 * The `grid` of a source whose tiles are not Web Mercator's: checked here, with the problems gridProblems finds
 * (src/geo/grid.ts) named by field.
 */
import { z } from 'zod';
import { GEOGRAPHIC_CRS, GEOGRAPHIC_GRID_CRS } from '../geo/crs';
import { gridProblems } from '../geo/grid';
import { MAX_ZOOM } from '../geo/mercator';

const finiteNumber = z.number().finite();

/**
 * A tile grid other than Web Mercator's (src/geo/grid.ts): a projected CRS, the top-left origin, a resolution
 * per level and the extent with tiles. The source's zoom levels are the grid's levels.
 */
export const gridSchema = z
  .object({
    crs: z.string().regex(/^EPSG:[1-9]\d{3,5}$/, 'must be an EPSG code such as EPSG:2056'),
    origin: z.tuple([finiteNumber, finiteNumber]),
    origins: z
      .array(z.tuple([finiteNumber, finiteNumber]))
      .max(MAX_ZOOM + 1)
      .optional(),
    resolutions: z
      .array(finiteNumber.positive())
      .min(1)
      .max(MAX_ZOOM + 1),
    extent: z.tuple([finiteNumber, finiteNumber, finiteNumber, finiteNumber]),
    proj4: z.string().min(1).max(1_000).optional(),
    axisOrder: z.enum(['en', 'ne']).optional(),
  })
  .strict()
  .superRefine((g, ctx) => {
    for (const p of gridProblems(g)) ctx.addIssue({ code: 'custom', path: p.path, input: g, message: p.message });
    // Web Mercator is the default grid; as a grid it would be a second, incompatible addressing of the same tiles.
    if (g.crs === 'EPSG:3857' || g.crs === 'EPSG:900913')
      ctx.addIssue({
        code: 'custom',
        path: ['crs'],
        input: g.crs,
        message: 'is the default grid: leave grid out for Web Mercator',
      });
    // GeoTIFF's ProjectedCSType key is a short: EPSG's codes for projected CRSs stay below 32767.
    if (Number(g.crs.slice(5)) > 32766)
      ctx.addIssue({
        code: 'custom',
        path: ['crs'],
        input: g.crs,
        message: 'must be an EPSG code up to 32766 (GeoTIFF keys hold no larger code)',
      });
    if (GEOGRAPHIC_CRS.has(g.crs) && g.crs !== GEOGRAPHIC_GRID_CRS) {
      ctx.addIssue({
        code: 'custom',
        path: ['crs'],
        input: g.crs,
        message: `must be a projected CRS in metres, or ${GEOGRAPHIC_GRID_CRS} in degrees; other geographic CRSs are not supported`,
      });
    }
  });
