<?php
// Driver for symfony/semaphore 5.4 (Debian php-symfony-semaphore) RedisStore,
// with phpredis and with Predis: weighted semaphore (limit 2), acquire,
// refresh (extend), release, refused extra holder, a holder that counts 2.
// Its scripts touch keys derived from KEYS[1] ("{name}:weight", "{name}:time")
// that are not passed as KEYS, and use ZINTERSTORE/EXPIREAT.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
declare(strict_types=1);
require_once 'Symfony/Component/Semaphore/autoload.php';
require_once 'Predis/autoload.php';

use Symfony\Component\Semaphore\SemaphoreFactory;
use Symfony\Component\Semaphore\Store\RedisStore;

[$host, $port] = explode(':', getenv('REDIS_ADDR') ?: '127.0.0.1:6379') + [1 => '6379'];
$port = (int)$port;
set_exception_handler(function (Throwable $e): void {
    fwrite(STDERR, "FAIL: " . get_class($e) . ": " . $e->getMessage() . "\n");
    exit(1);
});

function check(bool $cond, string $msg): void {
    if (!$cond) { throw new RuntimeException($msg); }
    echo "ok: $msg\n";
}
function phpredis(string $host, int $port): Redis {
    $r = new Redis();
    $r->connect($host, $port, 2.0);
    return $r;
}
function predis(string $host, int $port): Predis\Client {
    return new Predis\Client(['scheme' => 'tcp', 'host' => $host, 'port' => $port]);
}

// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
$raw = phpredis($host, $port);
$raw->client('setname', 'fencer-survey-check');

function exercise(string $label, callable $client, Redis $raw): void {
    $name = 'fencer-survey-' . getmypid() . '-' . $label;
    $timeKey = '{' . $name . '}:time';
    $weightKey = '{' . $name . '}:weight';
    $fa = new SemaphoreFactory(new RedisStore($client()));
    $fb = new SemaphoreFactory(new RedisStore($client()));

    $s1 = $fa->createSemaphore($name, 2, 1, 5.0, false);
    $s2 = $fb->createSemaphore($name, 2, 1, 5.0, false);
    check($s1->acquire() && $s2->acquire(), "$label: two holders acquired 2 of 2 permits");
    echo "$label: $weightKey = " . json_encode($raw->zRange($weightKey, 0, -1, true)) . "\n";
    $s3 = $fb->createSemaphore($name, 2, 1, 5.0, false);
    check(!$s3->acquire(), "$label: third holder refused while 2 of 2 permits are held");
    $before = (int)$raw->zScore($timeKey, array_keys($raw->zRange($timeKey, 0, -1, true))[0]);
    $s1->refresh(20.0);
    $after = max(array_map('intval', $raw->zRange($timeKey, 0, -1, true)));
    check($after >= $before + 14, "$label: refresh(20) extended a permit (expiry $before -> $after)");
    check($raw->ttl($timeKey) > 20, "$label: keys' TTL follows the latest expiry + 10 s (" . $raw->ttl($timeKey) . " s)");
    $s1->release();
    echo "$label: one permit released\n";
    check($s3->acquire(), "$label: third holder acquires after a release");
    $s2->release(); $s3->release();
    check($raw->zCard($weightKey) === 0, "$label: all permits released");

    // weight 2 takes the whole semaphore
    $heavy = $fa->createSemaphore($name, 2, 2, 5.0, false);
    check($heavy->acquire(), "$label: a holder of weight 2 acquired");
    $light = $fb->createSemaphore($name, 2, 1, 5.0, false);
    check(!$light->acquire(), "$label: weight-1 holder refused while weight 2 of 2 is held");
    $heavy->release();
    check($light->acquire(), "$label: weight-1 holder acquires after release");
    $light->release();
}

try {
    exercise('phpredis', fn() => phpredis($host, $port), $raw);
    exercise('predis', fn() => predis($host, $port), $raw);
    echo "PASS php-symfony-semaphore\n";
    exit(0);
} catch (Throwable $e) {
    fwrite(STDERR, "FAIL: " . get_class($e) . ": " . $e->getMessage() . "\n" . $e->getTraceAsString() . "\n");
    exit(1);
}
