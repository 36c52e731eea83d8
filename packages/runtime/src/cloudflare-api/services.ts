/**
 * What the host lends the Cloudflare routes beyond the native API's deps (ApiDeps): each member is
 * optional, so a server started without a host (tests of one route file) runs the routes that
 * need none. A route file that needs a host service adds its member here.
 */
export interface CloudflareServices {}
