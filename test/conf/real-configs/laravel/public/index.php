<?php
$uri = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
if ($uri === '/users') { header('Content-Type: application/json'); echo json_encode(['users' => [], 'page' => $_GET['page'] ?? null]), "\n"; exit; }
if ($uri === '/' ) { echo "Laravel home\n"; exit; }
if ($uri === '/login' && $_SERVER['REQUEST_METHOD'] === 'POST') { header('Location: http://example.com/dashboard', true, 302); exit; }
http_response_code(404);
echo "Laravel 404 for $uri\n";
